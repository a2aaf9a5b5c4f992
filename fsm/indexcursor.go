package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Index query cursors. A cursor names the last entry a page read, and
// the next page starts after it. It takes one of two forms:
//
//   - the entry's key (XE id fields gp) when that is at most
//     MaxIndexCursorBytes long: a place in key order, valid whatever
//     happens to the entry meanwhile;
//   - otherwise a short reference, cursorRef then the entry's global
//     position and a digest of its key: the next page finds the key again
//     through the entry's reverse key (XV id gp -> fields), which every
//     index keeps, and checks the digest. Such a cursor stops working when
//     its entry goes (its message removed, its stream's entry replaced, the
//     index rebuilt): the query is refused and starts again.
//
// Either way a cursor is at most MaxIndexCursorBytes, whatever the size of
// the values an index holds, and a longer one is refused before anything
// is read.

// MaxIndexCursorBytes bounds an index query's cursor, in a reply and in a
// request.
const MaxIndexCursorBytes = 1 << 10

// cursorRef starts a cursor of the short form; no key starts with it
// (every entry key starts with prefixIndexEntry).
var cursorRef = []byte("XR")

// cursorDigestBytes is the part of the key's SHA-256 a short cursor keeps.
const cursorDigestBytes = 16

// cursorRefBytes is the length of a short cursor.
const cursorRefBytes = 2 + 8 + cursorDigestBytes

const cursorGone = "names an entry that is gone (its message was removed or replaced, or the index rebuilt); " +
	"start the query again"

// cursorOf is the cursor that continues after the entry of key k, whose
// global position is gp.
func cursorOf(k []byte, gp int64) []byte {
	if len(k) <= MaxIndexCursorBytes {
		return bytes.Clone(k)
	}
	sum := sha256.Sum256(k)
	out := appendUint64(append(make([]byte, 0, cursorRefBytes), cursorRef...), uint64(gp))
	return append(out, sum[:cursorDigestBytes]...)
}

// cursorKey is the entry key cursor c names in index d: c itself, or the
// key a short cursor refers to. A cursor too long, malformed, or whose
// entry is gone is a ValidationError.
func (v *View) cursorKey(d *fsmv1.IndexDefinition, c []byte) ([]byte, error) {
	if len(c) > MaxIndexCursorBytes {
		return nil, invalid("cursor", "is %d bytes; a cursor is at most %d (give the next_cursor of the page before)",
			len(c), MaxIndexCursorBytes)
	}
	if !bytes.HasPrefix(c, cursorRef) {
		return c, nil
	}
	if len(c) != cursorRefBytes {
		return nil, invalid("cursor", "is not a cursor this server gave (give the next_cursor of the page before)")
	}
	gp := int64(binary.BigEndian.Uint64(c[len(cursorRef):]))
	fields, err := get(indexReader{v}, indexReverseKey(d.Id, gp))
	if err != nil {
		return nil, fmt.Errorf("fsm: index %q: cursor at global position %d: %w", d.Name, gp, err)
	}
	if fields == nil {
		return nil, invalid("cursor", "%s", cursorGone)
	}
	k := appendUint64(append(indexEntryPrefix(d.Id), fields...), uint64(gp))
	if sum := sha256.Sum256(k); !bytes.Equal(sum[:cursorDigestBytes], c[len(c)-cursorDigestBytes:]) {
		return nil, invalid("cursor", "%s", cursorGone)
	}
	return k, nil
}
