package fsm

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// StoredMessage field numbers (proto/skald/fsm/v1/record.proto).
const (
	smID       protowire.Number = 1
	smStream   protowire.Number = 2
	smType     protowire.Number = 3
	smPosition protowire.Number = 4
	smData     protowire.Number = 5
	smMetadata protowire.Number = 6
	smTime     protowire.Number = 7
	smTags     protowire.Number = 8
)

// decodeMessage decodes the StoredMessage at global position gp by hand.
// Every read decodes every message it returns, and the generic decoder
// (reflection, and UTF-8 checks of strings that were checked when written)
// was 40% of a 100-message read. It must agree with proto.Unmarshal
// (TestDecodeMessageMatchesProto): unknown fields are skipped, a singular
// field given twice keeps its last value, tags accumulate in order. One
// exception: data or metadata that is not UTF-8 (stored before the strict
// input rules refused it, fsm/validate.go) is read with each run of
// invalid bytes replaced by U+FFFD (bytes.ToValidUTF8), so no reply of
// either API carries invalid UTF-8. Such bytes can only sit
// inside JSON strings (the JSON was valid), so the result is valid JSON.
// The check costs a utf8.Valid pass; the stored bytes are not changed.
func decodeMessage(gp int64, val []byte) (Message, error) {
	buf := bytes.Clone(val) // val belongs to Pebble; Data and Metadata alias buf
	m := Message{GlobalPosition: gp}
	for len(buf) > 0 {
		num, typ, n := protowire.ConsumeTag(buf)
		if n < 0 {
			return Message{}, fmt.Errorf("fsm: message %d: %w", gp, protowire.ParseError(n))
		}
		buf = buf[n:]
		switch {
		case typ == protowire.BytesType && (num == smID || num == smStream || num == smType || num == smData || num == smMetadata || num == smTags):
			v, n := protowire.ConsumeBytes(buf)
			if n < 0 {
				return Message{}, fmt.Errorf("fsm: message %d: field %d: %w", gp, num, protowire.ParseError(n))
			}
			switch num {
			case smID:
				m.ID = string(v)
			case smStream:
				m.Stream = string(v)
			case smType:
				m.Type = string(v)
			case smData:
				m.Data = asText(v)
			case smMetadata:
				m.Metadata = asText(v)
			case smTags:
				m.Tags = append(m.Tags, string(v))
			}
			buf = buf[n:]
		case typ == protowire.VarintType && (num == smPosition || num == smTime):
			v, n := protowire.ConsumeVarint(buf)
			if n < 0 {
				return Message{}, fmt.Errorf("fsm: message %d: field %d: %w", gp, num, protowire.ParseError(n))
			}
			if num == smPosition {
				m.Position = int64(v)
			} else {
				m.Time = int64(v)
			}
			buf = buf[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, buf)
			if n < 0 {
				return Message{}, fmt.Errorf("fsm: message %d: field %d: %w", gp, num, protowire.ParseError(n))
			}
			buf = buf[n:]
		}
	}
	return m, nil
}

// asText returns v, capped at its length, or a copy with each run of
// invalid UTF-8 replaced by U+FFFD.
func asText(v []byte) []byte {
	if utf8.Valid(v) {
		return v[:len(v):len(v)]
	}
	return bytes.ToValidUTF8(v, []byte("\uFFFD"))
}

// peekStreamType returns a stored message's stream and type as slices of
// val, without decoding (or copying) the rest: what a scan by stream
// prefix or type needs to pass over a message it does not return. Like
// decodeMessage, a field given twice keeps its last value; a malformed
// value is left to decodeMessage to report (ok false).
func peekStreamType(val []byte) (stream, typ []byte, ok bool) {
	for buf := val; len(buf) > 0; {
		num, wt, n := protowire.ConsumeTag(buf)
		if n < 0 {
			return nil, nil, false
		}
		buf = buf[n:]
		if wt == protowire.BytesType && (num == smStream || num == smType) {
			v, n := protowire.ConsumeBytes(buf)
			if n < 0 {
				return nil, nil, false
			}
			if num == smStream {
				stream = v
			} else {
				typ = v
			}
			buf = buf[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, wt, buf)
		if n < 0 {
			return nil, nil, false
		}
		buf = buf[n:]
	}
	return stream, typ, true
}
