package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestSubscriptionSurvivesNodeKill kills the member a category
// subscription is served by while messages flow; the subscription must go
// on from another member and deliver every message exactly once, in order.
func TestSubscriptionSurvivesNodeKill(t *testing.T) {
	cl := testcluster.Start(t, 3)
	admin := newTestClient(t, cl.Endpoints(), "")
	ns, err := admin.CreateNamespace(ctxT(t), "shop", "", "")
	if err != nil {
		t.Fatal(err)
	}
	// c subscribes, and reports the members that delivered; w writes (so
	// that its writes are not among them).
	c, o := observedClient(t, client.Config{Endpoints: cl.Endpoints(), Token: ns.Token})
	w := newTestClient(t, cl.Endpoints(), ns.Token)
	var served []string // members that delivered, in order
	lastServed := func() string {
		served = append(served, o.take()...)
		if len(served) == 0 {
			return ""
		}
		return served[len(served)-1]
	}

	ctx := ctxT(t)
	var acked []string
	write := func(n int) {
		for i := range n {
			res, err := w.Append(ctx, fmt.Sprintf("orders-%d", i%3), []client.NewMessage{event(len(acked))})
			if err != nil {
				t.Fatalf("append: %v", err)
			}
			acked = append(acked, res.IDs[0])
		}
	}
	write(10) // stored before the subscription starts

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan client.Message, 100)
	ended := make(chan error, 1)
	caughtUp := make(chan struct{})
	go func() {
		for m, err := range c.Subscribe(sctx, client.Subscription{Category: "orders", CaughtUp: func() { close(caughtUp) }}) {
			if err != nil {
				ended <- err
				return
			}
			got <- m
		}
		ended <- errors.New("the sequence ended without an error")
	}()
	var delivered []client.Message
	receive := func(n int) {
		t.Helper()
		timeout := time.After(testcluster.Timeout)
		for range n {
			select {
			case m := <-got:
				delivered = append(delivered, m)
			case err := <-ended:
				t.Fatalf("subscription ended after %d messages: %v", len(delivered), err)
			case <-timeout:
				t.Fatalf("timed out with %d messages delivered", len(delivered))
			}
		}
	}
	receive(10)
	select {
	case <-caughtUp:
	case <-time.After(testcluster.Timeout):
		t.Fatal("no caught-up after the stored messages")
	}
	write(20)
	receive(5) // the rest may be in flight when the member dies
	victim := lastServed()
	for _, n := range cl.Nodes {
		if "http://"+n.Addr == victim {
			cl.Kill(n)
		}
	}
	write(20)
	receive(len(acked) - len(delivered))

	for i, m := range delivered {
		if m.ID != acked[i] || m.GlobalPosition != int64(i+1) {
			t.Fatalf("message %d: id %s at global position %d, want id %s at %d", i, m.ID, m.GlobalPosition, acked[i], i+1)
		}
	}
	select {
	case m := <-got:
		t.Fatalf("an extra message: %+v", m)
	default:
	}
	if now := lastServed(); now == victim || now == "" {
		t.Fatalf("the subscription was served by %q before the kill and by %q after", victim, now)
	}
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the sequence ended with %v, want context.Canceled", err)
		}
	case <-time.After(testcluster.Timeout):
		t.Fatal("the subscription did not end with its context")
	}
}
