package kurrentdb

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
)

// delivered is what a catch-up subscription sent up to a point.
type delivered struct {
	events      []*kurrentdb.ResolvedEvent
	checkpoints []uint64 // commit positions
	caughtUp    *kurrentdb.CaughtUp
}

// until receives from sub until it has seen n events and, if caughtUp,
// caught_up; it fails the test on a drop (the subscription's context
// bounds the wait).
func until(t *testing.T, sub *kurrentdb.Subscription, d *delivered, n int, caughtUp bool) {
	t.Helper()
	for len(d.events) < n || (caughtUp && d.caughtUp == nil) {
		e := sub.Recv()
		switch {
		case e.SubscriptionDropped != nil:
			t.Fatalf("dropped after %d events: %v", len(d.events), e.SubscriptionDropped.Error)
		case e.EventAppeared != nil:
			if d.caughtUp != nil && caughtUp {
				t.Fatalf("event %d after caught_up while waiting for caught_up", e.EventAppeared.OriginalEvent().EventNumber)
			}
			d.events = append(d.events, e.EventAppeared)
		case e.CheckPointReached != nil:
			d.checkpoints = append(d.checkpoints, e.CheckPointReached.Commit)
		case e.CaughtUp != nil:
			if d.caughtUp != nil {
				t.Fatal("caught_up sent twice")
			}
			d.caughtUp = e.CaughtUp
		}
	}
}

// A stream subscription sends the stored events after its start, then
// caught_up (with the server's time and the last revision sent), then
// live events in order. The client refuses a subscription whose first
// message is not the confirmation, so subscribing at all proves it.
func TestSubscribeToStream(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	for i, c := range []struct {
		name       string
		from       kurrentdb.StreamPosition
		stored     []uint64 // revisions before caught_up
		caughtUpAt *uint64
	}{
		{"start", kurrentdb.Start{}, []uint64{0, 1, 2}, ptr(uint64(2))},
		{"after revision 0", kurrentdb.Revision(0), []uint64{1, 2}, ptr(uint64(2))},
		{"after revision 2", kurrentdb.Revision(2), nil, nil},
		{"end", kurrentdb.End{}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			stream := fmt.Sprintf("clock-%d", i)
			appendN(t, cl, stream, 3)
			sub, err := cl.SubscribeToStream(ctxT(t), stream, kurrentdb.SubscribeToStreamOptions{From: c.from})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			d := &delivered{}
			until(t, sub, d, len(c.stored), true)
			if got := numbers(d.events); !slices.Equal(got, c.stored) {
				t.Errorf("stored events %v, want %v", got, c.stored)
			}
			if d.caughtUp.Date.IsZero() {
				t.Error("caught_up without the server's time")
			}
			if got := d.caughtUp.StreamRevision; (got == nil) != (c.caughtUpAt == nil) ||
				(got != nil && *got != *c.caughtUpAt) {
				t.Errorf("caught_up at revision %v, want %v", deref(got), deref(c.caughtUpAt))
			}
			appendN(t, cl, stream, 2)
			until(t, sub, d, len(c.stored)+2, false)
			if got := numbers(d.events[len(c.stored):]); !slices.Equal(got, []uint64{3, 4}) {
				t.Errorf("live events %v, want [3 4]", got)
			}
			if len(d.checkpoints) != 0 {
				t.Errorf("checkpoints %v on an unfiltered subscription", d.checkpoints)
			}
		})
	}
}

// A $all subscription filtered on an event-type prefix sends only the
// matching events, in global order, and with a window of one a
// checkpoint after every event considered, matching or not.
func TestSubscribeToAllFiltered(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	types := []string{"OrderPlaced", "Tick", "OrderPaid", "Tock", "OrderShipped"}
	for i, typ := range types {
		if _, err := cl.AppendToStream(ctxT(t), fmt.Sprintf("s-%d", i), kurrentdb.AppendToStreamOptions{},
			jsonEvent(typ, `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		filter *kurrentdb.SubscriptionFilter
		want   []string
	}{
		{"type prefix", &kurrentdb.SubscriptionFilter{Type: kurrentdb.EventFilterType, Prefixes: []string{"Order"}},
			[]string{"OrderPlaced", "OrderPaid", "OrderShipped"}},
		{"type regex", &kurrentdb.SubscriptionFilter{Type: kurrentdb.EventFilterType, Regex: "^T.ck$"},
			[]string{"Tick", "Tock"}},
		{"stream prefix", &kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: []string{"s-1", "s-4"}},
			[]string{"Tick", "OrderShipped"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub, err := cl.SubscribeToAll(ctxT(t), kurrentdb.SubscribeToAllOptions{From: kurrentdb.Start{},
				Filter: c.filter, MaxSearchWindow: 1, CheckpointInterval: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			d := &delivered{}
			until(t, sub, d, len(c.want), true)
			var got []string
			for _, e := range d.events {
				got = append(got, e.Event.EventType)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("events %v, want %v", got, c.want)
			}
			if want := []uint64{1, 2, 3, 4, 5}; !slices.Equal(d.checkpoints, want) {
				t.Errorf("checkpoints at %v, want %v", d.checkpoints, want)
			}
			if p := d.caughtUp.Position; p == nil || p.Commit != 5 {
				t.Errorf("caught_up at %v, want commit 5", p)
			}
		})
	}
}

// A subscription to $all from its end sends only events appended after
// it started, from a position only those after the position.
func TestSubscribeToAllFrom(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	appendN(t, cl, "clock-a", 3) // global positions 1..3
	for _, c := range []struct {
		name   string
		from   kurrentdb.AllPosition
		stored []uint64
	}{
		{"end", kurrentdb.End{}, nil},
		{"after position 1", kurrentdb.Position{Commit: 1, Prepare: 1}, []uint64{2, 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub, err := cl.SubscribeToAll(ctxT(t), kurrentdb.SubscribeToAllOptions{From: c.from})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			d := &delivered{}
			until(t, sub, d, len(c.stored), true)
			if got := globals(t, d.events); !slices.Equal(got, c.stored) {
				t.Errorf("stored events at %v, want %v", got, c.stored)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// A subscription request that cannot be served is InvalidArgument
// saying why, before anything (the confirmation included) is sent.
func TestSubscribeRefused(t *testing.T) {
	f := start(t, 1, insecureMode)
	appendN(t, insecureClient(t, f.leader), "clock-1", 1)
	stream := &streams.ReadReq_Options_Stream{Stream: &streams.ReadReq_Options_StreamOptions{
		StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte("clock-1")},
		RevisionOption:   &streams.ReadReq_Options_StreamOptions_Start{Start: &shared.Empty{}},
	}}
	all := &streams.ReadReq_Options_All{All: &streams.ReadReq_Options_AllOptions{
		AllOption: &streams.ReadReq_Options_AllOptions_Start{Start: &shared.Empty{}}}}
	typeFilter := func(e *streams.ReadReq_Options_FilterOptions_Expression) *streams.ReadReq_Options_Filter {
		return &streams.ReadReq_Options_Filter{Filter: &streams.ReadReq_Options_FilterOptions{
			Filter: &streams.ReadReq_Options_FilterOptions_EventType{EventType: e}}}
	}
	for _, c := range []struct {
		name   string
		opts   *streams.ReadReq_Options
		saying string
	}{
		{"filtered stream", &streams.ReadReq_Options{StreamOption: stream,
			FilterOption: typeFilter(&streams.ReadReq_Options_FilterOptions_Expression{Prefix: []string{"T"}})},
			"cannot be filtered"},
		{"backwards", &streams.ReadReq_Options{StreamOption: stream,
			ReadDirection: streams.ReadReq_Options_Backwards}, "forwards only"},
		{"bad regex", &streams.ReadReq_Options{StreamOption: all,
			FilterOption: typeFilter(&streams.ReadReq_Options_FilterOptions_Expression{Regex: "("})},
			"regular expression"},
		{"empty filter", &streams.ReadReq_Options{StreamOption: all,
			FilterOption: typeFilter(&streams.ReadReq_Options_FilterOptions_Expression{})},
			"prefixes or a regular expression"},
		{"no start", &streams.ReadReq_Options{StreamOption: &streams.ReadReq_Options_All{
			All: &streams.ReadReq_Options_AllOptions{}}}, "must start"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.CountOption = &streams.ReadReq_Options_Subscription{
				Subscription: &streams.ReadReq_Options_SubscriptionOptions{}}
			cl := connect.NewClient[streams.ReadReq, streams.ReadResp](h2cClient(),
				"http://"+f.leader.addr+readProcedure, connect.WithGRPC())
			s, err := cl.CallServerStream(ctxT(t), connect.NewRequest(&streams.ReadReq{Options: c.opts}))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var sent int
			for s.Receive() {
				sent++
			}
			if sent != 0 {
				t.Errorf("%d messages sent before the refusal", sent)
			}
			err = s.Err()
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), c.saying) {
				t.Errorf("got %v, want InvalidArgument saying %q", err, c.saying)
			}
		})
	}
}

// A credential scoped to a category may subscribe to its streams; a
// subscription outside its scope is refused before the confirmation,
// so the client's subscribe call itself fails.
func TestSubscribeScope(t *testing.T) {
	f := start(t, 1, secureMode)
	orders := tlsClient(t, f.leader, ordersName, f.orders)
	for _, c := range []struct {
		name   string
		sub    func() (*kurrentdb.Subscription, error)
		denied bool
	}{
		{"own category", func() (*kurrentdb.Subscription, error) {
			return orders.SubscribeToStream(ctxT(t), "order-1", kurrentdb.SubscribeToStreamOptions{})
		}, false},
		{"other category", func() (*kurrentdb.Subscription, error) {
			return orders.SubscribeToStream(ctxT(t), "invoice-1", kurrentdb.SubscribeToStreamOptions{})
		}, true},
		{"$all", func() (*kurrentdb.Subscription, error) {
			return orders.SubscribeToAll(ctxT(t), kurrentdb.SubscribeToAllOptions{From: kurrentdb.Start{}})
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub, err := c.sub()
			if !c.denied {
				if err != nil {
					t.Fatal(err)
				}
				defer sub.Close()
				until(t, sub, &delivered{}, 0, true)
				return
			}
			if code := errorCode(t, err); code != kurrentdb.ErrorCodeAccessDenied {
				t.Errorf("got %v, want access denied before the confirmation", err)
			}
		})
	}
}
