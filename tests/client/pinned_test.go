package client_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestPinned pins a client to one follower: every call goes to it (writes
// are forwarded by it), Status and the leader's hint do not add members,
// and a call only the leader serves is refused rather than sent elsewhere.
func TestPinned(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := ctxT(t)
	leader := cl.Leader()
	var follower *testcluster.Node
	for _, n := range cl.Nodes {
		if n != leader {
			follower = n
			break
		}
	}
	c, o := observedClient(t, client.Config{Endpoints: []string{follower.Addr}, Pinned: true})
	want := "http://" + follower.Addr

	var ids []string
	for i := range 3 {
		res, err := c.Append(ctx, "pinned-1", []client.NewMessage{event(i)})
		if err != nil {
			t.Fatalf("append %d through the follower: %v", i, err)
		}
		ids = append(ids, res.IDs...)
		if got := o.take(); !slices.Equal(got, []string{want}) {
			t.Fatalf("append %d answered by %v, want the pinned %q", i, got, want)
		}
	}
	checkLog(t, c, "pinned-1", ids)

	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 3 || st.NodeID != follower.ID() || st.LeaderID != leader.ID() {
		t.Fatalf("Status = %+v, want 3 servers as %s sees them, leader %s", st, follower.ID(), leader.ID())
	}
	for _, s := range st.Servers {
		// A follower asks every server for its last contact with the
		// leader (the leader's own is 0); one that does not answer in
		// time is unreachable, with none.
		switch {
		case s.Unreachable && s.LastContact >= 0:
			t.Fatalf("unreachable server %s has last contact %v", s.ID, s.LastContact)
		case !s.Unreachable && s.LastContact < 0:
			t.Fatalf("server %s answered without a last contact", s.ID)
		case s.ID == leader.ID() && !s.Unreachable && s.LastContact != 0:
			t.Fatalf("the leader's last contact is %v, want 0", s.LastContact)
		}
	}
	served := o.take()
	if len(served) < 2 {
		t.Fatalf("%d reads served, want the checkLog read and Status", len(served))
	}
	// Status added no member: reads go round robin over the members, and
	// every one after it is still served by the pinned endpoint alone.
	for i := range 6 {
		if _, err := c.StreamVersion(ctx, "pinned-1"); err != nil {
			t.Fatalf("read %d after Status: %v", i, err)
		}
	}
	served = append(served, o.take()...)
	if len(served) < 2+6 {
		t.Fatalf("%d reads served, want the checkLog read, Status and 6 more", len(served))
	}
	for _, u := range served {
		if u != want {
			t.Fatalf("a read was served by %s, not the pinned %s: Status added members", u, want)
		}
	}

	if _, err := c.TransferLeadership(ctx, ""); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("TransferLeadership on a pinned follower = %v, want ErrInvalidArgument (not the leader)", err)
	}
	if id, _ := leader.Leader(); id != leader.ID() {
		t.Fatalf("leadership moved to %s", id)
	}
}

// TestFailFast gives a FailFast client an endpoint that refuses
// connections: each kind of call reports ErrUnavailable wrapping the dial
// error at once, far within the caller's deadline; with a live endpoint
// beside it, calls fail over to that one within the round.
func TestFailFast(t *testing.T) {
	cl := testcluster.Start(t, 3)
	ctx := ctxT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	c, err := client.New(ctx, client.Config{Endpoints: []string{dead}, Token: testcluster.AdminToken, Pinned: true, FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check := func(what string, call func() error) {
		t.Helper()
		start := time.Now()
		err := call()
		var op *net.OpError
		if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &op) || op.Op != "dial" {
			t.Fatalf("%s: got %v, want ErrUnavailable wrapping a dial error", what, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%s took %v: FailFast waited instead of giving up", what, d)
		}
	}
	check("append", func() error {
		_, err := c.Append(ctx, "ff-1", []client.NewMessage{event(0)})
		return err
	})
	check("read", func() error {
		_, err := c.ReadStream(ctx, client.StreamQuery{Stream: "ff-1"})
		return err
	})
	check("leave", func() error {
		_, err := c.Leave(ctx, dead)
		return err
	})
	check("subscribe", func() error {
		for _, err := range c.Subscribe(ctx, client.Subscription{Stream: "ff-1"}) {
			return err
		}
		return errors.New("the subscription ended without an error")
	})

	live := cl.Leader().Addr
	both, err := client.New(ctx, client.Config{Endpoints: []string{dead, live}, Token: testcluster.AdminToken, Pinned: true, FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer both.Close()
	for i := range 4 { // round robin meets the dead endpoint first at least once
		if _, err := both.Append(ctx, "ff-2", []client.NewMessage{event(i)}); err != nil {
			t.Fatalf("append %d with a live endpoint beside the dead one: %v", i, err)
		}
		if _, err := both.ReadStream(ctx, client.StreamQuery{Stream: "ff-2"}); err != nil {
			t.Fatalf("read %d with a live endpoint beside the dead one: %v", i, err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for msg, err := range both.Subscribe(sctx, client.Subscription{Stream: "ff-2"}) {
		if err != nil || msg.Position != 0 {
			t.Fatalf("subscribe with a live endpoint beside the dead one: %+v, %v", msg, err)
		}
		break
	}

	// The last node of three has no leader: its refusal (after the
	// server's own wait) is the error's cause, at once.
	var survivor *testcluster.Node
	for _, n := range cl.Nodes {
		if n.Addr != live && survivor == nil {
			survivor = n
		} else {
			cl.Kill(n)
		}
	}
	solo, err := client.New(ctx, client.Config{Endpoints: []string{survivor.Addr}, Token: testcluster.AdminToken, Pinned: true, FailFast: true, ReadAttemptTimeout: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer solo.Close()
	noLeader := func(what string, call func() error) {
		t.Helper()
		start := time.Now()
		err := call()
		var ce *connect.Error
		if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable || !strings.Contains(ce.Message(), "no leader") {
			t.Fatalf("%s without a leader: got %v, want ErrUnavailable caused by the server's no leader", what, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("%s without a leader took %v", what, d)
		}
	}
	noLeader("append", func() error {
		_, err := solo.Append(ctx, "ff-3", []client.NewMessage{event(0)})
		return err
	})
	noLeader("read", func() error {
		_, err := solo.ReadStream(ctx, client.StreamQuery{Stream: "ff-2"}, client.WithLinearizable())
		return err
	})
}
