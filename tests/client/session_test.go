package client_test

import (
	"testing"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestSessionReadsSeeOwnWritesOnEveryMember writes and at once reads the
// stream's last message on each member in turn (reads go round robin):
// with session consistency every member must answer with the write just
// made, although a follower may not have applied it yet when asked.
func TestSessionReadsSeeOwnWritesOnEveryMember(t *testing.T) {
	cl := testcluster.Start(t, 3)
	admin := newTestClient(t, cl.Endpoints(), "")
	ns, err := admin.CreateNamespace(ctxT(t), "carts", "", "")
	if err != nil {
		t.Fatal(err)
	}
	c, o := observedClient(t, client.Config{Endpoints: cl.Endpoints(), Token: ns.Token})
	servedBy := map[string]int{} // reads per member
	ctx := ctxT(t)
	const writes = 40
	for i := range writes {
		res, err := c.Append(ctx, "cart-1", []client.NewMessage{event(i)})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if c.SessionIndex() < res.Index {
			t.Fatalf("session index %d after a write at index %d", c.SessionIndex(), res.Index)
		}
		o.take()
		for range 3 {
			m, found, err := c.LastMessage(ctx, "cart-1", "")
			if err != nil {
				t.Fatalf("read after write %d: %v", i, err)
			}
			if !found || m.ID != res.IDs[0] || m.Position != int64(i) {
				t.Fatalf("after write %d (id %s) a session read found %v, id %s at position %d", i, res.IDs[0], found, m.ID, m.Position)
			}
		}
		for _, u := range o.take() {
			servedBy[u]++
		}
	}
	for _, n := range cl.Nodes {
		if got := servedBy["http://"+n.Addr]; got != writes {
			t.Errorf("member %s served %d reads, want %d (one per write)", n.Addr, got, writes)
		}
	}
}
