package fsm

import (
	"crypto/md5"
	"encoding/binary"
	"strings"
)

// Category returns the category of a stream: the text before the first '-',
// or the whole name when it has none.
func Category(stream string) string {
	if i := strings.IndexByte(stream, '-'); i >= 0 {
		return stream[:i]
	}
	return stream
}

// CardinalID returns the id of a stream up to the first '+': for
// "account-123+retry" it is "123". A stream without '-' has none ("").
func CardinalID(stream string) string {
	i := strings.IndexByte(stream, '-')
	if i < 0 {
		return ""
	}
	id := stream[i+1:]
	if j := strings.IndexByte(id, '+'); j >= 0 {
		return id[:j]
	}
	return id
}

// cardinalHash is the first 8 bytes of md5(id), big-endian: Message DB's
// hash_64 before the sign is applied.
func cardinalHash(id string) uint64 {
	sum := md5.Sum([]byte(id))
	return binary.BigEndian.Uint64(sum[:8])
}

// groupMember returns the consumer-group member that owns a cardinal-id hash
// in a group of the given size: abs(int64(hash)) % size, as Message DB and
// EventoDB compute it. The absolute value is taken in uint64 so the one
// value without an int64 absolute value (math.MinInt64) still maps to a
// member.
func groupMember(hash uint64, size int64) int64 {
	h := int64(hash)
	var abs uint64
	if h < 0 {
		abs = uint64(-h) // for MinInt64 this is 1<<63, the true absolute value
	} else {
		abs = uint64(h)
	}
	return int64(abs % uint64(size))
}

// ConsumerGroupMember returns the member of a group of size that owns the
// stream, or -1 when the stream has no cardinal id (it belongs to no member).
func ConsumerGroupMember(stream string, size int64) int64 {
	id := CardinalID(stream)
	if id == "" || size <= 0 {
		return -1
	}
	return groupMember(cardinalHash(id), size)
}
