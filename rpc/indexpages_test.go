package rpc

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
)

// ownerDefinition indexes the string /owner of category acct, in an event
// index or (stream) one entry per stream.
func ownerDefinition(kind skaldv1.IndexKind) *skaldv1.IndexDefinition {
	return &skaldv1.IndexDefinition{Name: "owner", Version: 1, Category: "acct", Kind: kind, Fields: []*skaldv1.IndexField{
		{Source: skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, Pointer: "/owner",
			Type: skaldv1.IndexFieldType_INDEX_FIELD_TYPE_STRING},
	}}
}

// hitsBytes is what a reply's hits and cursor weigh on the wire.
func hitsBytes(r *skaldv1.IndexesQueryResponse) int {
	n := len(r.NextCursor)
	for _, h := range r.Hits {
		n += proto.Size(h)
	}
	return n
}

// An index query's page stops at the page byte cap like every read's:
// its hits (values, stream, message) and its cursor stay within the cap
// unless one hit alone is larger, with positions only too; its cursor is
// at most fsm.MaxIndexCursorBytes whatever the values; and the pages read
// on from the cursors return every hit once, in order.
func TestIndexQueryPagesCapped(t *testing.T) {
	t.Parallel()
	const pageCap = 64 << 10
	s := singleWith(t, Options{Subscribe: defaultOptions.Subscribe, Limits: Limits{PageBytes: pageCap}})
	ctx := ctxT(t)
	admin := newClients(s, protocols[0], adminToken)
	created, err := admin.namespaces.Create(ctx, connect.NewRequest(&skaldv1.CreateRequest{Name: "shop"}))
	if err != nil {
		t.Fatal(err)
	}
	c := newClients(s, protocols[0], created.Msg.Token)
	for _, kind := range []skaldv1.IndexKind{skaldv1.IndexKind_INDEX_KIND_EVENT, skaldv1.IndexKind_INDEX_KIND_STREAM} {
		d := ownerDefinition(kind)
		d.Name = fmt.Sprintf("owner-%d", kind)
		if _, err := c.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: d})); err != nil {
			t.Fatal(err)
		}
	}
	// 200 owners of 700 bytes (values short of any index key cap), 8 KiB
	// of data each; every tenth message has 100 KiB of data: more than a
	// page alone.
	var want []int64
	for i := range 200 {
		pad := 8 << 10
		if i%10 == 9 {
			pad = 100 << 10
		}
		data := fmt.Sprintf(`{"owner":"%03d%s","pad":"%s"}`, i, strings.Repeat("o", 700), strings.Repeat("p", pad))
		r, err := c.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("acct-%d", i),
			Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(data)}}}))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r.Msg.FirstGlobalPosition)
	}
	for _, tc := range []struct {
		name      string
		kind      skaldv1.IndexKind
		positions bool
		backward  bool
	}{
		{"event index, messages", skaldv1.IndexKind_INDEX_KIND_EVENT, false, false},
		{"event index, messages, descending", skaldv1.IndexKind_INDEX_KIND_EVENT, false, true},
		{"event index, positions only", skaldv1.IndexKind_INDEX_KIND_EVENT, true, false},
		{"event index, positions only, descending", skaldv1.IndexKind_INDEX_KIND_EVENT, true, true},
		{"stream index, messages", skaldv1.IndexKind_INDEX_KIND_STREAM, false, false},
		{"stream index, positions only", skaldv1.IndexKind_INDEX_KIND_STREAM, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				got    []int64
				cursor []byte
				pages  int
			)
			for {
				r, err := c.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{
					Name: fmt.Sprintf("owner-%d", tc.kind), Limit: fsm.MaxIndexLimit, PositionsOnly: tc.positions,
					Descending: tc.backward, Cursor: cursor}))
				if err != nil {
					t.Fatalf("page %d: %v", pages, err)
				}
				m := r.Msg
				pages++
				if len(m.Hits) == 0 {
					t.Fatalf("page %d is empty", pages)
				}
				if n := hitsBytes(m); n > pageCap && len(m.Hits) > 1 {
					t.Fatalf("page %d: %d hits of %d bytes with the cursor; the cap is %d", pages, len(m.Hits), n, pageCap)
				}
				if len(m.NextCursor) > fsm.MaxIndexCursorBytes {
					t.Fatalf("page %d: cursor of %d bytes, over %d", pages, len(m.NextCursor), fsm.MaxIndexCursorBytes)
				}
				if m.Truncated != (len(m.NextCursor) > 0) {
					t.Fatalf("page %d: truncated %v with a cursor of %d bytes", pages, m.Truncated, len(m.NextCursor))
				}
				for _, h := range m.Hits {
					got = append(got, h.GlobalPosition)
					if tc.positions != (h.Message == nil) {
						t.Fatalf("page %d: positions only %v, hit %d with message %v",
							pages, tc.positions, h.GlobalPosition, h.Message != nil)
					}
				}
				if cursor = m.NextCursor; len(cursor) == 0 {
					break
				}
				if pages > len(want) {
					t.Fatal("pages never end")
				}
			}
			wantOrder := slices.Clone(want)
			if tc.backward {
				slices.Reverse(wantOrder)
			}
			if !slices.Equal(got, wantOrder) {
				t.Fatalf("pages returned %v, want %v", got, wantOrder)
			}
			// 200 hits of over 700 bytes cannot fit in two pages of 64 KiB.
			if pages < 3 {
				t.Fatalf("%d pages for 200 hits of over 700 bytes each under a cap of %d", pages, pageCap)
			}
		})
	}

	// A cursor longer than any this server gives is refused, before
	// anything is read.
	q := &skaldv1.IndexesQueryRequest{Name: "owner-1", Limit: 1, PositionsOnly: true}
	first, err := c.indexes.Query(ctx, connect.NewRequest(q))
	if err != nil || len(first.Msg.NextCursor) == 0 {
		t.Fatalf("first page: %v, %v", first, err)
	}
	long := append(bytes.Clone(first.Msg.NextCursor), bytes.Repeat([]byte{'o'}, 2*fsm.MaxIndexCursorBytes)...)
	q.Cursor = long
	_, err = c.indexes.Query(ctx, connect.NewRequest(q))
	wantField(t, "a cursor over the cap", err, "cursor")
}
