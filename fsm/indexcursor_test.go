package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// A cursor is at most MaxIndexCursorBytes whatever the entries' keys: a
// key of two 700-byte values gets a short cursor, which continues the query exactly as
// the key would, and is refused naming the cursor once its entry is gone
// or when it was altered; a cursor over the cap is refused.
func TestIndexCursorBounded(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", &fsmv1.IndexDefinition{Name: "owner", Version: 1, Category: "acct",
		Fields: []*fsmv1.IndexField{dataField("/owner", tString), dataField("/region", tString)}}))
	long := strings.Repeat("o", 700)
	for i := range 4 {
		data := fmt.Sprintf(`{"owner":"%d%s","region":"%s"}`, i, long, long)
		f.must(appendCmd("ns", fmt.Sprintf("acct-%d", i), newMsg("T", data)))
	}
	catchUp(t, s, "ns")

	var (
		got    []int64
		cursor []byte
		first  []byte
	)
	for i := 0; ; i++ {
		gps, page := queryHits(t, s, IndexQuery{Index: "owner", Limit: 1, PositionsOnly: true, Cursor: cursor})
		got = append(got, gps...)
		if cursor = page.NextCursor; cursor == nil {
			break
		}
		if len(cursor) != cursorRefBytes {
			t.Fatalf("page %d: cursor of %d bytes, want the short form of %d", i, len(cursor), cursorRefBytes)
		}
		if first == nil {
			first = cursor
		}
		if i > 10 {
			t.Fatal("pages never end")
		}
	}
	if fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("pages returned %v, want [1 2 3 4]", got)
	}

	altered := bytes.Clone(first)
	altered[len(altered)-1] ^= 1
	for _, tc := range []struct {
		name   string
		cursor []byte
		remove bool
	}{
		{"altered", altered, false},
		{"over the cap", append(bytes.Clone(first), make([]byte, MaxIndexCursorBytes)...), false},
		{"entry gone", first, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.remove {
				f.must(truncateCmd("ns", "acct-0", 1))
				catchUp(t, s, "ns")
			}
			_, err := view(t, s, "ns").QueryIndex(IndexQuery{Index: "owner", Limit: 1, PositionsOnly: true, Cursor: tc.cursor})
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != "cursor" {
				t.Fatalf("query: %v; want a ValidationError on cursor", err)
			}
		})
	}
}
