package client_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
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
	// Unary appends (no AppendStreams), so that failedReads sees a write
	// that failed too.
	failed := &failedReads{next: h2c()}
	c, o := observedClient(t, client.Config{Endpoints: cl.Endpoints(), Token: ns.Token, HTTPClient: &http.Client{Transport: failed}, AppendStreams: -1})
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
	// Round robin gives each member one read per write, unless an
	// attempt failed (under -race on a loaded machine, 32/44/44 once):
	// a read refused by a member goes to the next, and a member that did
	// not answer a read or a write is left out for Config.DownFor while
	// the others serve its turns. Every member must still have served.
	failures := failed.list()
	total := 0
	for _, n := range cl.Nodes {
		got := servedBy["http://"+n.Addr]
		total += got
		switch {
		case len(failures) == 0 && got != writes:
			t.Errorf("member %s served %d reads, want %d (one per write)", n.Addr, got, writes)
		case got == 0:
			t.Errorf("member %s served no read", n.Addr)
		}
	}
	if total != 3*writes {
		t.Errorf("%d reads answered, want %d", total, 3*writes)
	}
	if len(failures) > 0 {
		t.Logf("%d read attempts failed (reads moved to other members): %v", len(failures), failures)
	}
}

// failedReads records the requests (reads and unary writes) that got no
// answer or an error status, New's Cluster.Status probe aside.
type failedReads struct {
	next http.RoundTripper
	mu   sync.Mutex
	what []string
}

func (f *failedReads) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.next.RoundTrip(req)
	// Cluster.Status is New's probe, which a namespace token may not make.
	if (err != nil || resp.StatusCode != http.StatusOK) && !strings.HasSuffix(req.URL.Path, "/Status") {
		what := fmt.Sprint(err)
		if err == nil {
			what = resp.Status
		}
		f.mu.Lock()
		f.what = append(f.what, req.URL.Host+req.URL.Path+": "+what)
		f.mu.Unlock()
	}
	return resp, err
}

func (f *failedReads) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.what)
}
