package kurrentdb

import (
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
)

// idOf returns the canonical string form of a KurrentDB event id, either
// form: structured (two int64 of the big-endian bytes, as the Go client
// sends) or string (as the Node and Rust clients send). A missing id is
// "" (Skald assigns one).
func idOf(id *shared.UUID) (string, error) {
	switch v := id.GetValue().(type) {
	case nil:
		return "", nil
	case *shared.UUID_Structured_:
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], uint64(v.Structured.GetMostSignificantBits()))
		binary.BigEndian.PutUint64(b[8:], uint64(v.Structured.GetLeastSignificantBits()))
		return uuid.UUID(b).String(), nil
	case *shared.UUID_String_:
		u, err := uuid.Parse(v.String_)
		if err != nil {
			return "", fmt.Errorf("id %q is not a UUID", v.String_)
		}
		return u.String(), nil
	default:
		return "", fmt.Errorf("id of unknown form %T", v)
	}
}

// protoID is a stored id in the form the reader asked for (structured
// unless string). An id that is not a UUID (none is, through this
// protocol or the API) is sent as a string.
func protoID(id string, structured bool) *shared.UUID {
	u, err := uuid.Parse(id)
	if err != nil || !structured {
		return &shared.UUID{Value: &shared.UUID_String_{String_: id}}
	}
	return &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{
		MostSignificantBits:  int64(binary.BigEndian.Uint64(u[:8])),
		LeastSignificantBits: int64(binary.BigEndian.Uint64(u[8:])),
	}}}
}
