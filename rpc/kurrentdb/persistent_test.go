package kurrentdb

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/skalddb/skald/internal/testutil"
)

// next is the next event of a persistent subscription, failing the test
// on a drop (the subscription's context bounds the wait).
func next(t *testing.T, sub *kurrentdb.PersistentSubscription) *kurrentdb.EventAppeared {
	t.Helper()
	for {
		e := sub.Recv()
		if e.SubscriptionDropped != nil {
			t.Fatalf("dropped: %v", e.SubscriptionDropped.Error)
		}
		if e.EventAppeared != nil {
			return e.EventAppeared
		}
	}
}

// fromStart are the default settings, starting at the stream's start.
func fromStart() kurrentdb.PersistentStreamSubscriptionOptions {
	s := kurrentdb.SubscriptionSettingsDefault()
	return kurrentdb.PersistentStreamSubscriptionOptions{Settings: &s, StartFrom: kurrentdb.Start{}}
}

// A persistent subscription to a stream, end to end with the official
// client: create, receive in order, ack, nack (park, retry), replay the
// parked event, the figures in GetInfo and List, delete. The client
// panics on any message but events after the confirmation, so passing
// is also the proof that none is sent.
func TestPersistentStream(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	appendN(t, cl, "order-1", 3)
	if err := cl.CreatePersistentSubscription(ctxT(t), "order-1", "billing", fromStart()); err != nil {
		t.Fatal(err)
	}
	err := cl.CreatePersistentSubscription(ctxT(t), "order-1", "billing", fromStart())
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeResourceAlreadyExists {
		t.Errorf("create twice: %v, want already exists", err)
	}
	sub, err := cl.SubscribeToPersistentSubscription(ctxT(t), "order-1", "billing",
		kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []uint64
	var evs []*kurrentdb.EventAppeared
	for range 3 {
		e := next(t, sub)
		evs = append(evs, e)
		got = append(got, e.Event.OriginalEvent().EventNumber)
		if e.RetryCount != 0 {
			t.Errorf("event %d: retry count %d on its first delivery", e.Event.OriginalEvent().EventNumber, e.RetryCount)
		}
	}
	if !slices.Equal(got, []uint64{0, 1, 2}) {
		t.Fatalf("events %v, want [0 1 2]", got)
	}
	if err := sub.Ack(evs[0].Event, evs[1].Event); err != nil {
		t.Fatal(err)
	}
	if err := sub.Nack("cannot bill", kurrentdb.NackActionPark, evs[2].Event); err != nil {
		t.Fatal(err)
	}
	info := func() *kurrentdb.PersistentSubscriptionInfo {
		i, err := cl.GetPersistentSubscriptionInfo(ctxT(t), "order-1", "billing",
			kurrentdb.GetPersistentSubscriptionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	testutil.Eventually(t, waitTimeout, "one parked, two acked", func() bool {
		i := info()
		return i.Stats.ParkedMessagesCount == 1 && i.Stats.TotalItems == 2
	})
	i := info()
	if i.EventSource != "order-1" || i.GroupName != "billing" || i.Status != "Live" || len(i.Connections) != 1 {
		t.Errorf("info: source %q group %q status %q connections %d, want order-1, billing, Live, 1",
			i.EventSource, i.GroupName, i.Status, len(i.Connections))
	}
	if s := i.Settings; s.MaxRetryCount != 10 || s.MessageTimeout != 30_000 || s.CheckpointAfter != 2000 ||
		s.ConsumerStrategyName != kurrentdb.ConsumerStrategyRoundRobin {
		t.Errorf("settings: retries %d, timeout %d ms, checkpoint after %d ms, strategy %s; want the client's defaults",
			s.MaxRetryCount, s.MessageTimeout, s.CheckpointAfter, s.ConsumerStrategyName)
	}
	if _, ok := i.Settings.StartFrom.(kurrentdb.Start); !ok {
		t.Errorf("start from %#v, want Start", i.Settings.StartFrom)
	}

	if err := cl.ReplayParkedMessages(ctxT(t), "order-1", "billing", kurrentdb.ReplayParkedMessagesOptions{}); err != nil {
		t.Fatal(err)
	}
	replayed := next(t, sub)
	if replayed.Event.OriginalEvent().EventID != evs[2].Event.OriginalEvent().EventID {
		t.Fatalf("after the replay event %d arrived, want the parked event 2", replayed.Event.OriginalEvent().EventNumber)
	}
	if err := sub.Ack(replayed.Event); err != nil {
		t.Fatal(err)
	}

	appendN(t, cl, "order-1", 1)
	fresh := next(t, sub)
	if n := fresh.Event.OriginalEvent().EventNumber; n != 3 {
		t.Fatalf("live event %d, want 3", n)
	}
	if err := sub.Nack("later", kurrentdb.NackActionRetry, fresh.Event); err != nil {
		t.Fatal(err)
	}
	again := next(t, sub)
	if again.Event.OriginalEvent().EventNumber != 3 || again.RetryCount != 1 {
		t.Errorf("after a retry nack: event %d with retry count %d, want 3 with 1",
			again.Event.OriginalEvent().EventNumber, again.RetryCount)
	}
	if err := sub.Ack(again.Event); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "nothing parked after the replay", func() bool {
		return info().Stats.ParkedMessagesCount == 0
	})

	list, err := cl.ListAllPersistentSubscriptions(ctxT(t), kurrentdb.ListPersistentSubscriptionsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range list {
		names = append(names, l.EventSource+"/"+l.GroupName)
	}
	if !slices.Equal(names, []string{"order-1/billing"}) {
		t.Errorf("list %v, want [order-1/billing]", names)
	}
	sub.Close()
	if err := cl.DeletePersistentSubscription(ctxT(t), "order-1", "billing",
		kurrentdb.DeletePersistentSubscriptionOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.GetPersistentSubscriptionInfo(ctxT(t), "order-1", "billing", kurrentdb.GetPersistentSubscriptionOptions{})
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeResourceNotFound {
		t.Errorf("info after delete: %v, want not found", err)
	}
}

// What cannot be served is refused with the client's error for it, and
// creates nothing.
func TestPersistentRefused(t *testing.T) {
	f := start(t, 1, secureMode)
	owner := tlsClient(t, f.leader, "initial", f.owner)
	reader := tlsClient(t, f.leader, readerName, f.reader)
	appendN(t, owner, "order-1", 1)

	_, err := owner.SubscribeToPersistentSubscription(ctxT(t), "order-1", "nobody",
		kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeResourceNotFound {
		t.Errorf("subscribe to an unknown group: %v, want not found", err)
	}
	err = reader.CreatePersistentSubscription(ctxT(t), "order-1", "g", fromStart())
	if code := errorCode(t, err); code != kurrentdb.ErrorCodeAccessDenied {
		t.Errorf("a reader creating a group: %v, want access denied", err)
	}
	for _, c := range []struct {
		name   string
		create func() error
		saying string
	}{
		{"pinned by correlation", func() error {
			o := fromStart()
			o.Settings.ConsumerStrategyName = kurrentdb.ConsumerStrategyPinnedByCorrelation
			return owner.CreatePersistentSubscription(ctxT(t), "order-1", "g", o)
		}, "PinnedByCorrelation"},
		{"dispatch to single", func() error {
			o := fromStart()
			o.Settings.ConsumerStrategyName = kurrentdb.ConsumerStrategyDispatchToSingle
			return owner.CreatePersistentSubscription(ctxT(t), "order-1", "g", o)
		}, "DispatchToSingle"},
		{"event-type filter", func() error {
			return owner.CreatePersistentSubscriptionToAll(ctxT(t), "g", kurrentdb.PersistentAllSubscriptionOptions{
				StartFrom: kurrentdb.Start{},
				Filter:    &kurrentdb.SubscriptionFilter{Type: kurrentdb.EventFilterType, Prefixes: []string{"Order"}}})
		}, "cannot be served"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.create()
			if err == nil || !strings.Contains(err.Error(), c.saying) {
				t.Errorf("got %v, want an error saying %q", err, c.saying)
			}
		})
	}
	list, err := owner.ListAllPersistentSubscriptions(ctxT(t), kurrentdb.ListPersistentSubscriptionsOptions{})
	if err != nil || len(list) != 0 {
		t.Errorf("after the refusals: %d subscriptions (%v), want none", len(list), err)
	}
}

// A $all persistent subscription filtered on one stream-name prefix
// "<category>-" is a category group: it receives only that category's
// events.
func TestPersistentAllCategory(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	for i, s := range []string{"order-1", "invoice-1", "order-2"} {
		if _, err := cl.AppendToStream(ctxT(t), s, kurrentdb.AppendToStreamOptions{},
			jsonEvent("Event", fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	err := cl.CreatePersistentSubscriptionToAll(ctxT(t), "orders", kurrentdb.PersistentAllSubscriptionOptions{
		StartFrom: kurrentdb.Start{},
		Filter:    &kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: []string{"order-"}}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cl.SubscribeToPersistentSubscriptionToAll(ctxT(t), "orders",
		kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var streams []string
	for range 2 {
		e := next(t, sub)
		streams = append(streams, e.Event.OriginalEvent().StreamID)
		if err := sub.Ack(e.Event); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(streams, []string{"order-1", "order-2"}) {
		t.Errorf("streams %v, want [order-1 order-2]", streams)
	}
	i, err := cl.GetPersistentSubscriptionInfoToAll(ctxT(t), "orders", kurrentdb.GetPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if i.EventSource != "$all" || i.GroupName != "orders" {
		t.Errorf("info: source %q group %q, want $all, orders", i.EventSource, i.GroupName)
	}
}

func TestGroupName(t *testing.T) {
	for _, c := range []struct{ stream, group, want string }{
		{"order-1", "billing", "billing.order-1"},
		{"$all", "billing", "billing._24all"},
		{"a.b_c", "g:1", "g_3A1.a_2Eb_5Fc"},
	} {
		got, err := groupName(c.stream, c.group)
		if err != nil || got != c.want {
			t.Errorf("groupName(%q, %q) = %q, %v; want %q", c.stream, c.group, got, err, c.want)
			continue
		}
		stream, group, ok := parseGroupName(got)
		if !ok || stream != c.stream || group != c.group {
			t.Errorf("parseGroupName(%q) = %q, %q, %v; want %q, %q", got, stream, group, ok, c.stream, c.group)
		}
	}
	for _, bad := range []string{"plain", "g._2", "g._ZZ", ".s"} {
		if s, g, ok := parseGroupName(bad); ok {
			t.Errorf("parseGroupName(%q) = %q, %q: want not one of this protocol's", bad, s, g)
		}
	}
	if _, err := groupName(strings.Repeat("s", 130), "g"); err == nil {
		t.Error("a name past Skald's limit was accepted")
	}
}

// Update changes the settings GetInfo reports; a nack with Stop ends the
// subscription, and the stopped event is delivered again to the next
// subscriber.
func TestPersistentUpdateAndStop(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	appendN(t, cl, "order-1", 1)
	if err := cl.CreatePersistentSubscription(ctxT(t), "order-1", "g", fromStart()); err != nil {
		t.Fatal(err)
	}
	s := kurrentdb.SubscriptionSettingsDefault()
	s.MaxRetryCount, s.MessageTimeout, s.MaxSubscriberCount = 3, 5000, 7
	s.ConsumerStrategyName = kurrentdb.ConsumerStrategyPinned
	if err := cl.UpdatePersistentSubscription(ctxT(t), "order-1", "g",
		kurrentdb.PersistentStreamSubscriptionOptions{Settings: &s}); err != nil {
		t.Fatal(err)
	}
	i, err := cl.GetPersistentSubscriptionInfo(ctxT(t), "order-1", "g", kurrentdb.GetPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := i.Settings; got.MaxRetryCount != 3 || got.MessageTimeout != 5000 || got.MaxSubscriberCount != 7 ||
		got.ConsumerStrategyName != kurrentdb.ConsumerStrategyPinned {
		t.Errorf("after the update: retries %d, timeout %d, subscribers %d, strategy %s; want 3, 5000, 7, Pinned",
			got.MaxRetryCount, got.MessageTimeout, got.MaxSubscriberCount, got.ConsumerStrategyName)
	}
	if err := cl.RestartPersistentSubscriptionSubsystem(ctxT(t),
		kurrentdb.RestartPersistentSubscriptionSubsystemOptions{}); err != nil {
		t.Errorf("restart: %v", err)
	}
	sub, err := cl.SubscribeToPersistentSubscription(ctxT(t), "order-1", "g",
		kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	e := next(t, sub)
	if err := sub.Nack("stop", kurrentdb.NackActionStop, e.Event); err != nil {
		t.Fatal(err)
	}
	for {
		ev := sub.Recv()
		if ev.SubscriptionDropped != nil {
			if !strings.Contains(ev.SubscriptionDropped.Error.Error(), "stopped by a nack") {
				t.Errorf("dropped with %v, want the stop", ev.SubscriptionDropped.Error)
			}
			break
		}
		if ev.EventAppeared != nil {
			t.Fatalf("event %d after the stop", ev.EventAppeared.Event.OriginalEvent().EventNumber)
		}
	}
	again, err := cl.SubscribeToPersistentSubscription(ctxT(t), "order-1", "g",
		kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if r := next(t, again); r.Event.OriginalEvent().EventNumber != 0 || r.RetryCount != 1 {
		t.Errorf("after the stop: event %d with retry count %d, want 0 with 1",
			r.Event.OriginalEvent().EventNumber, r.RetryCount)
	}
}
