package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestWritesSurviveLeaderKill kills the leader under writes. A writer that
// has no write in flight at the kill (it holds mu around each write) must
// see no error at all: its next write fails over to the new leader. Two
// free writers may be cut off mid-write; such writes are retried with the
// same ids (idempotent writes) and acknowledged, or report
// ErrUnknownOutcome and nothing else. In the final log every acknowledged
// write is present once and nothing is duplicated.
func TestWritesSurviveLeaderKill(t *testing.T) {
	cl := testcluster.Start(t, 3)
	c, o := observedClient(t, client.Config{Endpoints: cl.Endpoints()})
	ctx := ctxT(t)
	leader := cl.Leader()
	if got, want := writeTarget(t, c, o), "http://"+leader.Addr; got != want {
		t.Fatalf("the client routes writes to %q, want the leader %q", got, want)
	}

	var (
		mu       sync.Mutex // the guarded writer's write in flight
		progress atomic.Int64
		stop     atomic.Bool
		guarded  []string
		done     = make(chan error, 3)
	)
	go func() {
		for i := range 60 {
			mu.Lock()
			res, err := c.Append(ctx, "orders-1", []client.NewMessage{event(i)})
			mu.Unlock()
			if err != nil {
				done <- fmt.Errorf("guarded write %d: %w", i, err)
				return
			}
			guarded = append(guarded, res.IDs[0])
			progress.Add(1)
		}
		done <- nil
	}()
	type freeLog struct{ acked, unknown []string }
	free := make([]freeLog, 2)
	for w := range free {
		go func() {
			for i := 0; !stop.Load(); i++ {
				m := event(i)
				m.ID = fmt.Sprintf("00000000-0000-4000-8000-%012d", w*1_000_000+i)
				_, err := c.Append(ctx, fmt.Sprintf("orders-%d", w+2), []client.NewMessage{m})
				switch {
				case err == nil:
					free[w].acked = append(free[w].acked, m.ID)
				case errors.Is(err, client.ErrUnknownOutcome):
					t.Logf("free writer %d: %v", w, err)
					free[w].unknown = append(free[w].unknown, m.ID)
				default:
					done <- fmt.Errorf("free write %d/%d: %w", w, i, err)
					return
				}
			}
			done <- nil
		}()
	}

	testcluster.WaitFor(t, "20 guarded writes", func() bool { return progress.Load() >= 20 })
	mu.Lock()
	cl.Kill(leader)
	mu.Unlock()
	testcluster.WaitFor(t, "60 guarded writes", func() bool { return progress.Load() == 60 || len(done) > 0 })
	stop.Store(true)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	checkLog(t, c, "orders-1", guarded)

	// Session reads spread over the members skip the dead one and see
	// the last write.
	for i := range 6 {
		m, found, err := c.LastMessage(ctx, "orders-1", "")
		if err != nil || !found || m.ID != guarded[len(guarded)-1] {
			t.Fatalf("read %d after the kill: %v, found %v, id %s, want %s", i, err, found, m.ID, guarded[len(guarded)-1])
		}
	}

	// Free writers: acknowledged ids exactly once, unknown ones at most
	// once, nothing else.
	for w, f := range free {
		got, err := c.ReadStream(ctx, client.StreamQuery{Stream: fmt.Sprintf("orders-%d", w+2), Limit: -1}, client.WithLinearizable())
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, m := range got {
			seen[m.ID]++
		}
		for _, id := range f.acked {
			if seen[id] != 1 {
				t.Errorf("free writer %d: acknowledged %s is in the log %d times", w, id, seen[id])
			}
			delete(seen, id)
		}
		for _, id := range f.unknown {
			delete(seen, id)
		}
		for id, n := range seen {
			t.Errorf("free writer %d: %s is in the log %d times but was neither acknowledged nor unknown", w, id, n)
		}
		if len(f.acked) == 0 {
			t.Errorf("free writer %d: no write acknowledged", w)
		}
	}

	// The client follows the new leader.
	newLeader := cl.Leader()
	testcluster.WaitFor(t, "the client to route writes to the new leader", func() bool { return writeTarget(t, c, o) == "http://"+newLeader.Addr })
}

// TestWritesSurviveLeadershipTransfer hands leadership over three times
// while four writers append without pause: no write may fail, and each
// stream holds every acknowledged write once, in order.
func TestWritesSurviveLeadershipTransfer(t *testing.T) {
	cl := testcluster.Start(t, 3)
	c, o := observedClient(t, client.Config{Endpoints: cl.Endpoints()})
	ctx := ctxT(t)

	const writers = 4
	var (
		progress atomic.Int64
		stop     atomic.Bool
		acked    [writers][]string
		done     = make(chan error, writers)
	)
	for w := range writers {
		go func() {
			for i := 0; !stop.Load(); i++ {
				res, err := c.Append(ctx, fmt.Sprintf("orders-%d", w), []client.NewMessage{event(i)})
				if err != nil {
					done <- fmt.Errorf("writer %d, write %d: %w", w, i, err)
					return
				}
				acked[w] = append(acked[w], res.IDs[0])
				progress.Add(1)
			}
			done <- nil
		}()
	}
	for k := range 3 {
		base := progress.Load()
		testcluster.WaitFor(t, "writes before a transfer", func() bool { return progress.Load() >= base+60 || len(done) > 0 })
		old := cl.Leader()
		// Raft gives a transfer an election timeout to complete; under
		// -race on a loaded machine it may time out ("leadership did not
		// move"): ask again, as node's TestWritesAcrossLeadershipTransfers
		// does (the writes must survive every attempt as well).
		testutil.Until(t, testcluster.Timeout, fmt.Sprintf("transfer %d", k), func() (bool, string) {
			_, err := c.TransferLeadership(ctx, "")
			return err == nil || cl.Leader() != old, fmt.Sprint(err)
		})
		testcluster.WaitFor(t, "a new leader", func() bool { return cl.Leader() != old })
	}
	base := progress.Load()
	testcluster.WaitFor(t, "writes after the last transfer", func() bool { return progress.Load() >= base+60 || len(done) > 0 })
	stop.Store(true)
	for range writers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for w := range writers {
		checkLog(t, c, fmt.Sprintf("orders-%d", w), acked[w])
	}
	l := cl.Leader()
	testcluster.WaitFor(t, "the client to route writes to the leader", func() bool { return writeTarget(t, c, o) == "http://"+l.Addr })
}

// TestNamespaceTokenFollowsLeaderHints: a namespace token cannot ask
// Cluster.Status, so the client learns the leader from the hint on a
// forwarded write's reply, and follows it through a transfer and a kill.
func TestNamespaceTokenFollowsLeaderHints(t *testing.T) {
	cl := testcluster.Start(t, 3)
	admin := newTestClient(t, cl.Endpoints(), "")
	leader := cl.Leader()
	var endpoints []string // followers first: the first write is forwarded
	for _, n := range cl.Nodes {
		if n != leader {
			endpoints = append(endpoints, n.Addr)
		}
	}
	ns, err := admin.CreateNamespace(ctxT(t), "hints", "", "")
	if err != nil {
		t.Fatal(err)
	}
	c, o := observedClient(t, client.Config{Endpoints: append(endpoints, leader.Addr), Token: ns.Token})
	ctx := ctxT(t)
	var acked []string
	// write appends one message and returns the member that answered it.
	write := func() string {
		t.Helper()
		o.take()
		res, err := c.Append(ctx, "orders-1", []client.NewMessage{event(len(acked))})
		if err != nil {
			t.Fatalf("write %d: %v", len(acked), err)
		}
		acked = append(acked, res.IDs[0])
		urls := o.take()
		if len(urls) != 1 {
			t.Fatalf("write %d observed as answered by %v, want one member", len(acked)-1, urls)
		}
		return urls[0]
	}
	if got := write(); got == "http://"+leader.Addr {
		t.Fatalf("the client wrote to the leader %q before it could know it", got)
	}
	if got, want := write(), "http://"+leader.Addr; got != want {
		t.Fatalf("after a forwarded write the client routes to %q, want the leader %q", got, want)
	}

	if _, err := admin.TransferLeadership(ctx, ""); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, "a new leader", func() bool { return cl.Leader() != leader })
	leader = cl.Leader()
	write()
	if got, want := write(), "http://"+leader.Addr; got != want {
		t.Fatalf("after a transfer the client routes to %q, want the new leader %q", got, want)
	}

	cl.Kill(leader)
	write()
	leader = cl.Leader()
	testcluster.WaitFor(t, "the client to follow the leader after a kill", func() bool {
		write()
		return write() == "http://"+leader.Addr
	})
	checkLog(t, c, "orders-1", acked)
}

// TestReadsLeaveAHungMember adds a member that accepts connections and
// never answers: reads go round robin, so one lands on it, and every read
// must still succeed within its own 3 s deadline on a live member.
func TestReadsLeaveAHungMember(t *testing.T) {
	cl := testcluster.Start(t, 3)
	hung, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: the kernel completes the handshake
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	admin := newTestClient(t, cl.Endpoints(), "")
	ns, err := admin.CreateNamespace(ctxT(t), "hung", "", "")
	if err != nil {
		t.Fatal(err)
	}
	c, o := observedClient(t, client.Config{Endpoints: append(cl.Endpoints(), hung.Addr().String()), Token: ns.Token})
	for i := range 8 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		start := time.Now()
		v, err := c.StreamVersion(ctx, "orders-1")
		cancel()
		if err != nil || v != -1 {
			t.Fatalf("read %d with a hung member: version %d, %v after %v", i, v, err, time.Since(start))
		}
	}
	if served := o.count(); served["http://"+hung.Addr().String()] != 0 || len(served) != 3 {
		t.Fatalf("reads served by %v, want the three live members only", served)
	}
}

// TestDiscoveryFromOneEndpoint gives an admin client one member's address:
// it must learn the others from Cluster.Status, spread reads over all
// three, write to the leader, and keep working when that one member dies.
func TestDiscoveryFromOneEndpoint(t *testing.T) {
	cl := testcluster.Start(t, 3)
	leader := cl.Leader()
	var seed *testcluster.Node
	for _, n := range cl.Nodes {
		if n != leader {
			seed = n
			break
		}
	}
	c, o := observedClient(t, client.Config{Endpoints: []string{seed.Addr}})
	if got, want := writeTarget(t, c, o), "http://"+leader.Addr; got != want {
		t.Fatalf("New routes writes to %q, want the leader %q", got, want)
	}
	ctx := ctxT(t)
	var acked []string
	served := map[string]int{} // reads per member
	readAndWrite := func(reads int) {
		t.Helper()
		for range reads {
			res, err := c.Append(ctx, "orders-1", []client.NewMessage{event(len(acked))})
			if err != nil {
				t.Fatalf("write %d: %v", len(acked), err)
			}
			acked = append(acked, res.IDs[0])
			o.take()
			if m, found, err := c.LastMessage(ctx, "orders-1", ""); err != nil || !found || m.ID != res.IDs[0] {
				t.Fatalf("read after write %d: %v, found %v, id %s", len(acked)-1, err, found, m.ID)
			}
			for _, u := range o.take() {
				served[u]++
			}
		}
	}
	readAndWrite(6)
	if len(served) != 3 {
		t.Fatalf("reads served by %v, want all three members", served)
	}

	cl.Kill(seed)
	readAndWrite(6)
	checkLog(t, c, "orders-1", acked)
}
