package rpc

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/node"
	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

// An index query spends the server's scan budget on the entries of
// removed messages its index still holds (the loop has not applied the
// removal yet: its interval here is an hour, and LOCAL reads do not kick
// it): past the budget the reply is truncated with next_cursor, never an
// error, and going on from the cursors returns exactly the live hits.
func TestIndexQueryScanBudget(t *testing.T) {
	const budget = 10
	c := node.StartTestCluster(t, 1, node.TestClusterOptions{
		Config: func(_ int, cfg *node.Config) { cfg.ReadWait, cfg.IndexInterval = 2*time.Second, time.Hour },
		Handler: func(tn *node.TestNode) http.Handler {
			o := defaultOptions
			o.Registerer, o.Gatherer, o.Limits = tn.Registry, tn.Registry, Limits{ScanBudget: budget}
			return NewHandler(tn.Node, o)
		},
	})
	l := c.Leader()
	createAdmin(t, l.Node)
	s := &server{n: l.Node, addr: l.Addr, reg: l.Registry}
	ctx := ctxT(t)
	created, err := newClients(s, protocols[0], adminToken).namespaces.Create(ctx, connect.NewRequest(&skaldv1.CreateRequest{Name: "shop"}))
	if err != nil {
		t.Fatal(err)
	}
	cl := newClients(s, protocols[0], created.Msg.Token)
	if _, err := cl.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: amountDefinition()})); err != nil {
		t.Fatal(err)
	}
	var live []int64
	for i := range 35 {
		stream := "acct-1" // amounts 0..29: first in the index, then removed
		if i >= 30 {
			stream = "acct-2"
		}
		r, err := cl.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: stream,
			Messages: []*skaldv1.NewMessage{{Type: "T", Data: fmt.Appendf(nil, `{"amount":%d}`, i)}}}))
		if err != nil {
			t.Fatal(err)
		}
		if i >= 30 {
			live = append(live, r.Msg.FirstGlobalPosition)
		}
	}
	// A LINEARIZABLE query kicks the loop: every append is indexed.
	if r, err := cl.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", Limit: 100, PositionsOnly: true})); err != nil || len(r.Msg.Hits) != 35 {
		t.Fatalf("linearizable query before the truncate: %v, %v", r, err)
	}
	if _, err := cl.events.TruncateStream(ctx, connect.NewRequest(&skaldv1.TruncateStreamRequest{Stream: "acct-1", Before: 30})); err != nil {
		t.Fatal(err)
	}
	local := &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LOCAL}
	var (
		got    []int64
		pages  []int
		cursor []byte
	)
	for i := 0; ; i++ {
		r, err := cl.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", Limit: 100, Cursor: cursor, Read: local}))
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		pages = append(pages, len(r.Msg.Hits))
		for _, h := range r.Msg.Hits {
			got = append(got, h.GlobalPosition)
		}
		if r.Msg.Truncated != (len(r.Msg.NextCursor) > 0) {
			t.Fatalf("page %d: truncated %v with cursor %x", i, r.Msg.Truncated, r.Msg.NextCursor)
		}
		if cursor = r.Msg.NextCursor; len(cursor) == 0 {
			break
		}
		if i > 100 {
			t.Fatal("pages never end")
		}
	}
	if !slices.Equal(got, live) || !slices.Equal(pages, []int{0, 0, 0, 5}) {
		t.Fatalf("pages of %v hits, %v; want [0 0 0 5], %v", pages, got, live)
	}
}
