package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/testutil"
)

// Subscription groups on a real 3-node cluster: consumers attach to the
// leader and to followers (relayed through the peer service), acks go to
// any node.

// testConsumer runs one Consume stream and hands its deliveries to the test.
type testConsumer struct {
	name   string
	got    chan *skaldv1.Delivery
	cancel context.CancelFunc
	done   chan error
}

func startConsumer(t *testing.T, c clients, group, name string) *testConsumer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tc := &testConsumer{name: name, got: make(chan *skaldv1.Delivery, 10_000), cancel: cancel, done: make(chan error, 1)}
	stream, err := c.subs.Consume(ctx, connect.NewRequest(&skaldv1.ConsumeRequest{Group: group, Consumer: name}))
	if err != nil {
		cancel()
		t.Fatalf("consume %s: %v", name, err)
	}
	go func() {
		defer stream.Close()
		for stream.Receive() {
			if d := stream.Msg().GetDelivery(); d != nil {
				tc.got <- d
			}
		}
		tc.done <- stream.Err()
	}()
	t.Cleanup(tc.stop)
	return tc
}

func (tc *testConsumer) stop() { tc.cancel() }

// next waits for the consumer's next delivery.
func (tc *testConsumer) next(t *testing.T) *skaldv1.Delivery {
	t.Helper()
	select {
	case d := <-tc.got:
		return d
	case err := <-tc.done:
		t.Fatalf("consumer %s ended: %v", tc.name, err)
	case <-time.After(waitTimeout):
		t.Fatalf("consumer %s: no delivery within %v", tc.name, waitTimeout)
	}
	return nil
}

func appendMsgs(t *testing.T, c clients, stream, typ string, n int) {
	t.Helper()
	msgs := make([]*skaldv1.NewMessage, n)
	for i := range msgs {
		msgs[i] = &skaldv1.NewMessage{Type: typ, Data: []byte(fmt.Sprintf(`{"i":%d}`, i))}
	}
	if _, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: stream, Messages: msgs})); err != nil {
		t.Fatal(err)
	}
}

func createGroup(t *testing.T, c clients, req *skaldv1.CreateGroupRequest) *skaldv1.GroupInfo {
	t.Helper()
	res, err := c.subs.CreateGroup(ctxT(t), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("create group %s: %v", req.Name, err)
	}
	return res.Msg.Group
}

func ack(t *testing.T, c clients, group string, ids ...string) {
	t.Helper()
	if _, err := c.subs.Ack(ctxT(t), connect.NewRequest(&skaldv1.AckRequest{Group: group, Ids: ids})); err != nil {
		t.Fatalf("ack %v: %v", ids, err)
	}
}

func TestSubscriptionGroupsAPI(t *testing.T) {
	t.Parallel()
	f := followerOfThree(t)
	c := newClients(f, protocols[0], adminToken)
	ctx := ctxT(t)
	appendMsgs(t, c, "order-1", "Placed", 3)
	g := createGroup(t, c, &skaldv1.CreateGroupRequest{Name: "billing", Source: &skaldv1.CreateGroupRequest_Category{Category: "order"},
		Settings: &skaldv1.GroupSettings{MaxRetries: proto.Int32(2), Strategy: skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED}})
	if g.GetCategory() != "order" || g.Start != 1 || g.Checkpoint != 1 || g.Settings.GetMaxRetries() != 2 ||
		g.Settings.GetMaxInFlight() != 1000 || g.Settings.Strategy != skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED {
		t.Fatalf("created %v", g)
	}
	end := createGroup(t, c, &skaldv1.CreateGroupRequest{Name: "tail", Source: &skaldv1.CreateGroupRequest_All{All: true},
		Start: &skaldv1.CreateGroupRequest_StartAtEnd{StartAtEnd: true}})
	if end.Start != 4 || !end.GetAll() {
		t.Fatalf("start at end: %v, want start 4 over all", end)
	}
	up, err := c.subs.UpdateGroup(ctx, connect.NewRequest(&skaldv1.UpdateGroupRequest{Name: "billing",
		Settings: &skaldv1.GroupSettings{AckTimeout: durationpb.New(5 * time.Second)}}))
	if err != nil || up.Msg.Group.Settings.AckTimeout.AsDuration() != 5*time.Second || up.Msg.Group.Settings.GetMaxRetries() != 2 {
		t.Fatalf("update: %v %v", up, err)
	}
	list, err := c.subs.ListGroups(ctx, connect.NewRequest(&skaldv1.ListGroupsRequest{}))
	if err != nil || len(list.Msg.Groups) != 2 || list.Msg.Groups[0].Name != "billing" || list.Msg.Groups[1].Name != "tail" {
		t.Fatalf("list: %v %v", list, err)
	}

	refusals := []struct {
		name string
		call func() error
		code connect.Code
	}{
		{"create with a taken name", func() error {
			_, err := c.subs.CreateGroup(ctx, connect.NewRequest(&skaldv1.CreateGroupRequest{Name: "billing", Source: &skaldv1.CreateGroupRequest_All{All: true}}))
			return err
		}, connect.CodeAlreadyExists},
		{"create without a source", func() error {
			_, err := c.subs.CreateGroup(ctx, connect.NewRequest(&skaldv1.CreateGroupRequest{Name: "x"}))
			return err
		}, connect.CodeInvalidArgument},
		{"create on a stream name as category", func() error {
			_, err := c.subs.CreateGroup(ctx, connect.NewRequest(&skaldv1.CreateGroupRequest{Name: "x", Source: &skaldv1.CreateGroupRequest_Category{Category: "order-1"}}))
			return err
		}, connect.CodeInvalidArgument},
		{"create with a bad name", func() error {
			_, err := c.subs.CreateGroup(ctx, connect.NewRequest(&skaldv1.CreateGroupRequest{Name: "a/b", Source: &skaldv1.CreateGroupRequest_All{All: true}}))
			return err
		}, connect.CodeInvalidArgument},
		{"start past the largest global position", func() error {
			_, err := c.subs.CreateGroup(ctx, connect.NewRequest(&skaldv1.CreateGroupRequest{Name: "x", Source: &skaldv1.CreateGroupRequest_All{All: true},
				Start: &skaldv1.CreateGroupRequest_StartGlobalPosition{StartGlobalPosition: math.MaxInt64}}))
			return err
		}, connect.CodeInvalidArgument},
		{"ack timeout out of range", func() error {
			_, err := c.subs.CreateGroup(ctx, connect.NewRequest(&skaldv1.CreateGroupRequest{Name: "x", Source: &skaldv1.CreateGroupRequest_All{All: true},
				Settings: &skaldv1.GroupSettings{AckTimeout: durationpb.New(2 * time.Hour)}}))
			return err
		}, connect.CodeInvalidArgument},
		{"max in flight zero", func() error {
			_, err := c.subs.UpdateGroup(ctx, connect.NewRequest(&skaldv1.UpdateGroupRequest{Name: "billing", Settings: &skaldv1.GroupSettings{MaxInFlight: proto.Int32(0)}}))
			return err
		}, connect.CodeInvalidArgument},
		{"max retries too high", func() error {
			_, err := c.subs.UpdateGroup(ctx, connect.NewRequest(&skaldv1.UpdateGroupRequest{Name: "billing", Settings: &skaldv1.GroupSettings{MaxRetries: proto.Int32(1001)}}))
			return err
		}, connect.CodeInvalidArgument},
		{"update an unknown group", func() error {
			_, err := c.subs.UpdateGroup(ctx, connect.NewRequest(&skaldv1.UpdateGroupRequest{Name: "nope"}))
			return err
		}, connect.CodeNotFound},
		{"get an unknown group", func() error {
			_, err := c.subs.GetGroup(ctx, connect.NewRequest(&skaldv1.GetGroupRequest{Name: "nope"}))
			return err
		}, connect.CodeNotFound},
		{"delete an unknown group", func() error {
			_, err := c.subs.DeleteGroup(ctx, connect.NewRequest(&skaldv1.DeleteGroupRequest{Name: "nope"}))
			return err
		}, connect.CodeNotFound},
		{"ack of an unknown id", func() error {
			_, err := c.subs.Ack(ctx, connect.NewRequest(&skaldv1.AckRequest{Group: "billing", Ids: []string{"0198a6f0-0000-7000-8000-000000000000"}}))
			return err
		}, connect.CodeFailedPrecondition},
		{"ack without ids", func() error {
			_, err := c.subs.Ack(ctx, connect.NewRequest(&skaldv1.AckRequest{Group: "billing"}))
			return err
		}, connect.CodeInvalidArgument},
		{"ack in an unknown group", func() error {
			_, err := c.subs.Ack(ctx, connect.NewRequest(&skaldv1.AckRequest{Group: "nope", Ids: []string{"x"}}))
			return err
		}, connect.CodeNotFound},
		{"nack with an unknown action", func() error {
			_, err := c.subs.Nack(ctx, connect.NewRequest(&skaldv1.NackRequest{Group: "billing", Ids: []string{"x"}, Action: 9}))
			return err
		}, connect.CodeInvalidArgument},
		{"replay of a position never parked", func() error {
			_, err := c.subs.ReplayParked(ctx, connect.NewRequest(&skaldv1.ReplayParkedRequest{Group: "billing", GlobalPositions: []int64{2}}))
			return err
		}, connect.CodeNotFound},
		{"parked list of an unknown group", func() error {
			_, err := c.subs.ListParked(ctx, connect.NewRequest(&skaldv1.ListParkedRequest{Group: "nope"}))
			return err
		}, connect.CodeNotFound},
		{"consume an unknown group", func() error {
			s, err := c.subs.Consume(ctx, connect.NewRequest(&skaldv1.ConsumeRequest{Group: "nope"}))
			if err != nil {
				return err
			}
			defer s.Close()
			for s.Receive() {
			}
			return s.Err()
		}, connect.CodeNotFound},
	}
	createGroup(t, c, &skaldv1.CreateGroupRequest{Name: "solo", Source: &skaldv1.CreateGroupRequest_All{All: true},
		Settings: &skaldv1.GroupSettings{MaxConsumers: proto.Int32(1)}})
	startConsumer(t, c, "solo", "first")
	refusals = append(refusals, struct {
		name string
		call func() error
		code connect.Code
	}{"a consumer over max_consumers", func() error {
		s, err := c.subs.Consume(ctx, connect.NewRequest(&skaldv1.ConsumeRequest{Group: "solo", Consumer: "second"}))
		if err != nil {
			return err
		}
		defer s.Close()
		for s.Receive() {
		}
		return s.Err()
	}, connect.CodeResourceExhausted})
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			if err := r.call(); connect.CodeOf(err) != r.code {
				t.Fatalf("got %v, want %v", err, r.code)
			}
		})
	}
	// Nothing the refusals tried changed anything.
	got, err := c.subs.GetGroup(ctx, connect.NewRequest(&skaldv1.GetGroupRequest{Name: "billing"}))
	if err != nil || got.Msg.Group.Settings.GetMaxInFlight() != 1000 || got.Msg.Group.Settings.GetMaxRetries() != 2 || got.Msg.Group.Parked != 0 {
		t.Fatalf("billing after refusals: %v %v", got, err)
	}
	if _, err := c.subs.DeleteGroup(ctx, connect.NewRequest(&skaldv1.DeleteGroupRequest{Name: "tail"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.subs.GetGroup(ctx, connect.NewRequest(&skaldv1.GetGroupRequest{Name: "tail"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("deleted group: %v", err)
	}
}

// clusterClients returns clients of every server, leader first.
func clusterClients(t *testing.T) ([]clients, []*server) {
	servers, l := clusterOfThree(t)
	out := []clients{newClients(l, protocols[1], adminToken)}
	order := []*server{l}
	for _, s := range servers {
		if s != l {
			out = append(out, newClients(s, protocols[1], adminToken))
			order = append(order, s)
		}
	}
	return out, order
}

// TestGroupCompetingConsumers: three consumers (on the leader and on both
// followers) share a category; every message is delivered to exactly one
// of them once when all ack.
func TestGroupCompetingConsumers(t *testing.T) {
	t.Parallel()
	cs, _ := clusterClients(t)
	createGroup(t, cs[0], &skaldv1.CreateGroupRequest{Name: "g", Source: &skaldv1.CreateGroupRequest_Category{Category: "acct"},
		Settings: &skaldv1.GroupSettings{MaxInFlightPerConsumer: proto.Int32(4), CheckpointAfter: proto.Int32(10)}})
	const streams, per = 6, 10
	for i := range streams {
		appendMsgs(t, cs[i%3], fmt.Sprintf("acct-%d", i), "T", per)
	}
	appendMsgs(t, cs[0], "other-1", "T", 5) // not in the category
	consumers := make([]*testConsumer, 3)
	for i := range consumers {
		consumers[i] = startConsumer(t, cs[i], "g", fmt.Sprintf("c%d", i))
	}
	var mu sync.Mutex
	seen := map[int64]string{}
	var dup []string
	var wg sync.WaitGroup
	total := streams * per
	count := make(chan struct{}, total*2)
	for i, tc := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case d := <-tc.got:
					mu.Lock()
					if prev, ok := seen[d.Message.GlobalPosition]; ok {
						dup = append(dup, fmt.Sprintf("gp %d to %s and %s", d.Message.GlobalPosition, prev, tc.name))
					}
					seen[d.Message.GlobalPosition] = tc.name
					mu.Unlock()
					// Ack through another node than the consumer's.
					if _, err := cs[(i+1)%3].subs.Ack(context.Background(), connect.NewRequest(&skaldv1.AckRequest{Group: "g", Ids: []string{d.Message.Id}})); err != nil {
						t.Errorf("ack: %v", err)
					}
					count <- struct{}{}
				case <-tc.done:
					return
				}
			}
		}()
	}
	deadline := time.After(waitTimeout)
	for range total {
		select {
		case <-count:
		case <-deadline:
			t.Fatalf("only %d of %d delivered", len(seen), total)
		}
	}
	for _, tc := range consumers {
		tc.stop()
	}
	wg.Wait()
	if len(dup) > 0 {
		t.Fatalf("delivered twice: %v", dup)
	}
	by := map[string]int{}
	for _, name := range seen {
		by[name]++
	}
	if len(seen) != total || len(by) != 3 {
		t.Fatalf("%d distinct messages over consumers %v, want %d over 3", len(seen), by, total)
	}
	// The checkpoint reaches the end of what was acked.
	testutil.Eventually(t, waitTimeout, "the checkpoint", func() bool {
		g, err := cs[1].subs.GetGroup(context.Background(), connect.NewRequest(&skaldv1.GetGroupRequest{Name: "g"}))
		return err == nil && g.Msg.Group.Checkpoint == int64(total+5+1)
	})
}

// TestGroupRedeliveryAfterTimeout: a consumer that never acks loses its
// messages to another consumer once the ack timeout passes.
func TestGroupRedeliveryAfterTimeout(t *testing.T) {
	t.Parallel()
	cs, _ := clusterClients(t)
	createGroup(t, cs[0], &skaldv1.CreateGroupRequest{Name: "g", Source: &skaldv1.CreateGroupRequest_Stream{Stream: "job-1"},
		Settings: &skaldv1.GroupSettings{MaxInFlightPerConsumer: proto.Int32(3), AckTimeout: durationpb.New(300 * time.Millisecond)}})
	appendMsgs(t, cs[0], "job-1", "T", 3)
	lazy := startConsumer(t, cs[1], "g", "lazy")
	held := map[string]bool{}
	for range 3 {
		held[lazy.next(t).Message.Id] = true
	}
	worker := startConsumer(t, cs[2], "g", "worker")
	for len(held) > 0 {
		d := worker.next(t)
		if !held[d.Message.Id] || d.Delivery < 2 {
			t.Fatalf("worker got %s delivery %d; want one of the lazy consumer's, redelivered", d.Message.Id, d.Delivery)
		}
		delete(held, d.Message.Id)
		ack(t, cs[0], "g", d.Message.Id)
	}
	// The lazy consumer's late ack is refused: the message is no longer its.
	if _, err := cs[1].subs.Ack(ctxT(t), connect.NewRequest(&skaldv1.AckRequest{Group: "g", Ids: []string{"nope"}})); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("late ack: %v", err)
	}
}

// TestGroupPoisonParked: a message that keeps failing is parked after max
// retries; replayed, it is delivered again and, acked, leaves the group.
func TestGroupPoisonParked(t *testing.T) {
	t.Parallel()
	cs, _ := clusterClients(t)
	createGroup(t, cs[0], &skaldv1.CreateGroupRequest{Name: "g", Source: &skaldv1.CreateGroupRequest_Category{Category: "pay"},
		Settings: &skaldv1.GroupSettings{MaxRetries: proto.Int32(2), CheckpointInterval: durationpb.New(20 * time.Millisecond)}})
	appendMsgs(t, cs[0], "pay-1", "Ok", 2)
	appendMsgs(t, cs[0], "pay-2", "Poison", 1)
	appendMsgs(t, cs[0], "pay-3", "Ok", 2)
	tc := startConsumer(t, cs[1], "g", "c")
	okAcked, poisonDeliveries := 0, 0
	var poisonID string
	for okAcked < 4 || poisonDeliveries < 3 {
		d := tc.next(t)
		if d.Message.Type == "Poison" {
			poisonDeliveries++
			poisonID = d.Message.Id
			if d.Delivery != int32(poisonDeliveries) {
				t.Fatalf("poison delivery %d numbered %d", poisonDeliveries, d.Delivery)
			}
			if _, err := cs[2].subs.Nack(ctxT(t), connect.NewRequest(&skaldv1.NackRequest{Group: "g", Ids: []string{d.Message.Id}, Action: skaldv1.NackAction_NACK_ACTION_RETRY})); err != nil {
				t.Fatal(err)
			}
			continue
		}
		ack(t, cs[1], "g", d.Message.Id)
		okAcked++
	}
	var parked *skaldv1.ListParkedResponse
	testutil.Eventually(t, waitTimeout, "the poison message parked", func() bool {
		p, err := cs[2].subs.ListParked(context.Background(), connect.NewRequest(&skaldv1.ListParkedRequest{Group: "g"}))
		parked = p.Msg
		return err == nil && p.Msg.Total == 1
	})
	p := parked.Messages[0]
	if p.Id != poisonID || p.Stream != "pay-2" || p.Deliveries != 3 || p.Reason == "" {
		t.Fatalf("parked %v", p)
	}
	// Checkpoint went past it: it is done until replayed.
	g, err := cs[0].subs.GetGroup(ctxT(t), connect.NewRequest(&skaldv1.GetGroupRequest{Name: "g"}))
	if err != nil || g.Msg.Group.Checkpoint != 6 || g.Msg.Group.Parked != 1 {
		t.Fatalf("group after parking: %v %v", g, err)
	}
	rp, err := cs[1].subs.ReplayParked(ctxT(t), connect.NewRequest(&skaldv1.ReplayParkedRequest{Group: "g"}))
	if err != nil || rp.Msg.Replayed != 1 || rp.Msg.Parked != 0 {
		t.Fatalf("replay: %v %v", rp, err)
	}
	d := tc.next(t)
	if d.Message.Id != poisonID || d.Delivery != 1 {
		t.Fatalf("after replay got %s delivery %d, want the poison message again", d.Message.Id, d.Delivery)
	}
	ack(t, cs[0], "g", d.Message.Id)
	testutil.Eventually(t, waitTimeout, "the replay settled", func() bool {
		g, err := cs[0].subs.GetGroup(context.Background(), connect.NewRequest(&skaldv1.GetGroupRequest{Name: "g"}))
		return err == nil && g.Msg.Group.Replaying == 0 && g.Msg.Group.Parked == 0
	})
	// A parked message can also be parked by the consumer and deleted.
	appendMsgs(t, cs[0], "pay-4", "Bad", 1)
	d = tc.next(t)
	if _, err := cs[0].subs.Nack(ctxT(t), connect.NewRequest(&skaldv1.NackRequest{Group: "g", Ids: []string{d.Message.Id}, Action: skaldv1.NackAction_NACK_ACTION_PARK, Reason: "bad input"})); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the parked message", func() bool {
		p, err := cs[2].subs.ListParked(context.Background(), connect.NewRequest(&skaldv1.ListParkedRequest{Group: "g"}))
		return err == nil && len(p.Msg.Messages) == 1 && p.Msg.Messages[0].Reason == "bad input" && p.Msg.Messages[0].Deliveries == 1
	})
	del, err := cs[2].subs.DeleteParked(ctxT(t), connect.NewRequest(&skaldv1.DeleteParkedRequest{Group: "g", GlobalPositions: []int64{d.Message.GlobalPosition}}))
	if err != nil || del.Msg.Deleted != 1 || del.Msg.Parked != 0 {
		t.Fatalf("delete parked: %v %v", del, err)
	}
}

// TestGroupPinnedOrder: under the pinned strategy each stream's messages
// reach one consumer, in order, even when some are retried.
func TestGroupPinnedOrder(t *testing.T) {
	t.Parallel()
	cs, servers := clusterClients(t)
	createGroup(t, cs[0], &skaldv1.CreateGroupRequest{Name: "g", Source: &skaldv1.CreateGroupRequest_Category{Category: "cart"},
		Settings: &skaldv1.GroupSettings{Strategy: skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED}})
	consumers := make([]*testConsumer, 3)
	for i := range consumers {
		consumers[i] = startConsumer(t, cs[i], "g", fmt.Sprintf("c%d", i))
	}
	// All three attached before any message exists: assignment is stable.
	testutil.Eventually(t, waitTimeout, "three consumers", func() bool {
		st, ok := cs[0].subs, true
		g, err := st.GetGroup(context.Background(), connect.NewRequest(&skaldv1.GetGroupRequest{Name: "g"}))
		return ok && err == nil && g.Msg.Group.State.Consumers == 3
	})
	// The leader exports the group's live state (summed over its groups:
	// without --metrics-tenant-labels no series names the group).
	resp, err := http.Get("http://" + servers[0].addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "\nskald_group_consumers 3\n") {
		t.Fatalf("/metrics lacks the group's consumers:\n%s", grepLines(string(body), "skald_group"))
	}
	const streams, per = 8, 6
	for round := range per {
		for s := range streams {
			appendMsgs(t, cs[(s+round)%3], fmt.Sprintf("cart-%d", s), "T", 1)
		}
	}
	type acked struct {
		consumer string
		pos      int64
	}
	var mu sync.Mutex
	order := map[string][]acked{}
	retried := map[string]bool{}
	done := make(chan struct{}, streams*per)
	for i, tc := range consumers {
		go func() {
			for {
				select {
				case d := <-tc.got:
					m := d.Message
					key := fmt.Sprintf("%s/%d", m.Stream, m.Position)
					mu.Lock()
					first := !retried[key] && m.Position%3 == 1
					retried[key] = true
					mu.Unlock()
					if first { // fail every third message once
						cs[i].subs.Nack(context.Background(), connect.NewRequest(&skaldv1.NackRequest{Group: "g", Ids: []string{m.Id}}))
						continue
					}
					mu.Lock()
					order[m.Stream] = append(order[m.Stream], acked{tc.name, m.Position})
					mu.Unlock()
					if _, err := cs[i].subs.Ack(context.Background(), connect.NewRequest(&skaldv1.AckRequest{Group: "g", Ids: []string{m.Id}})); err != nil {
						t.Errorf("ack: %v", err)
					}
					done <- struct{}{}
				case <-tc.done:
					return
				}
			}
		}()
	}
	deadline := time.After(waitTimeout)
	for range streams * per {
		select {
		case <-done:
		case <-deadline:
			t.Fatal("not every message was acked in time")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	used := map[string]bool{}
	for stream, acks := range order {
		var pos []int64
		for _, a := range acks {
			pos = append(pos, a.pos)
			used[a.consumer] = true
			if a.consumer != acks[0].consumer {
				t.Errorf("%s went to %s and %s", stream, acks[0].consumer, a.consumer)
			}
		}
		if !slices.Equal(pos, []int64{0, 1, 2, 3, 4, 5}) {
			t.Errorf("%s acked in order %v", stream, pos)
		}
	}
	if len(used) < 2 {
		t.Errorf("pinning used consumers %v: want streams spread over several", used)
	}
}

// TestGroupResumeAfterLeaderChange: acked progress is checkpointed through
// Raft; after the leader changes, the consumer continues from the
// checkpoint, unacked messages are delivered again and none is skipped.
func TestGroupResumeAfterLeaderChange(t *testing.T) {
	t.Parallel()
	cs, servers := clusterClients(t)
	createGroup(t, cs[0], &skaldv1.CreateGroupRequest{Name: "g", Source: &skaldv1.CreateGroupRequest_All{All: true},
		Settings: &skaldv1.GroupSettings{MaxInFlightPerConsumer: proto.Int32(5), CheckpointAfter: proto.Int32(1)}})
	appendMsgs(t, cs[0], "a-1", "T", 20)
	// Consume on a follower: the stream is relayed to the leader.
	tc := startConsumer(t, cs[1], "g", "c")
	acked := map[int64]bool{}
	for len(acked) < 8 {
		d := tc.next(t)
		ack(t, cs[1], "g", d.Message.Id)
		acked[d.Message.GlobalPosition] = true
	}
	testutil.Eventually(t, waitTimeout, "the checkpoint at 9", func() bool {
		g, err := cs[2].subs.GetGroup(context.Background(), connect.NewRequest(&skaldv1.GetGroupRequest{Name: "g"}))
		return err == nil && g.Msg.Group.Checkpoint == 9
	})
	// Move leadership to the consumer's node's peer.
	ctx := ctxT(t)
	if err := servers[0].n.TransferLeadership(ctx, servers[2].n.ID()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the new leader", servers[2].n.IsLeader)
	// The consumer may have been cut off (Unavailable): reconnect like a client.
	delivered := map[int64]int{}
	for gp := range acked {
		delivered[gp] = 1
	}
	deadline := time.Now().Add(waitTimeout)
	for len(acked) < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("acked %d of 20 after the leader change", len(acked))
		}
		select {
		case d := <-tc.got:
			gp := d.Message.GlobalPosition
			delivered[gp]++
			if _, err := cs[1].subs.Ack(ctx, connect.NewRequest(&skaldv1.AckRequest{Group: "g", Ids: []string{d.Message.Id}})); err == nil {
				acked[gp] = true
			} else if connect.CodeOf(err) != connect.CodeFailedPrecondition && connect.CodeOf(err) != connect.CodeUnavailable {
				t.Fatalf("ack: %v", err)
			}
		case err := <-tc.done:
			if !errors.Is(err, context.Canceled) && connect.CodeOf(err) != connect.CodeUnavailable {
				t.Fatalf("consumer ended: %v", err)
			}
			tc = startConsumer(t, cs[1], "g", "c")
		case <-time.After(100 * time.Millisecond):
		}
	}
	for gp := int64(1); gp <= 20; gp++ {
		if delivered[gp] == 0 {
			t.Fatalf("message %d was never delivered", gp)
		}
	}
	testutil.Eventually(t, waitTimeout, "the checkpoint at 21", func() bool {
		g, err := cs[0].subs.GetGroup(context.Background(), connect.NewRequest(&skaldv1.GetGroupRequest{Name: "g"}))
		return err == nil && g.Msg.Group.Checkpoint == 21
	})
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// appendTagged appends one message with tags and returns its global
// position.
func appendTagged(t *testing.T, c clients, stream, typ string, tags ...string) int64 {
	t.Helper()
	res, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: stream,
		Messages: []*skaldv1.NewMessage{{Type: typ, Data: []byte(`{}`), Tags: tags}}}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.FirstGlobalPosition
}

// TestGroupOnQuery: a group whose source is a query (DCB) is handed
// exactly the tagged messages that match, in global order per stream
// (pinned), never an untagged one or one of another type; acked progress
// survives a leadership transfer and nothing that matches is skipped, not
// even what is written after it.
func TestGroupOnQuery(t *testing.T) {
	t.Parallel()
	cs, servers := clusterClients(t)
	pinned := skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED
	g := createGroup(t, cs[0], &skaldv1.CreateGroupRequest{Name: "vip",
		Source: &skaldv1.CreateGroupRequest_Query{Query: &skaldv1.Query{Items: []*skaldv1.QueryItem{
			{Types: []string{"Order"}, Tags: []string{"vip"}},
			{Tags: []string{"audit", "eu"}},
		}}},
		Settings: &skaldv1.GroupSettings{MaxInFlightPerConsumer: proto.Int32(3), CheckpointAfter: proto.Int32(1), Strategy: pinned}})
	if q := g.GetQuery(); len(q.GetItems()) != 2 || !slices.Equal(q.Items[1].Tags, []string{"audit", "eu"}) {
		t.Fatalf("created source %v, want the query", g.Source)
	}
	// Refusals: a bad query, with the right code and field; nothing created.
	for _, q := range []*skaldv1.Query{{}, {Items: []*skaldv1.QueryItem{{}}}, {Items: []*skaldv1.QueryItem{{Tags: []string{""}}}}} {
		_, err := cs[1].subs.CreateGroup(ctxT(t), connect.NewRequest(&skaldv1.CreateGroupRequest{Name: "bad",
			Source: &skaldv1.CreateGroupRequest_Query{Query: q}}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "query.items") {
			t.Fatalf("create on query %v: %v, want InvalidArgument on query.items", q, err)
		}
	}
	if _, err := cs[1].subs.GetGroup(ctxT(t), connect.NewRequest(&skaldv1.GetGroupRequest{Name: "bad",
		Read: &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LINEARIZABLE}})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("refused group: %v, want NotFound", err)
	}
	// write appends a round of messages; want collects the matching ones.
	want := map[int64]string{} // gp -> stream
	round := func(r int) {
		for i := range 4 {
			c := cs[(r+i)%3]
			s := fmt.Sprintf("order-%d", i%2)
			want[appendTagged(t, c, s, "Order", "vip", fmt.Sprintf("order:%d", i))] = s
			appendTagged(t, c, s, "Order")                 // untagged: not indexed
			appendTagged(t, c, s, "Refund", "vip")         // another type
			appendTagged(t, c, "audit-1", "Seen", "audit") // one of the item's tags only
			want[appendTagged(t, c, "audit-1", "Seen", "eu", "audit", "x")] = "audit-1"
		}
	}
	round(0)
	tc := startConsumer(t, cs[1], "vip", "c")
	delivered := map[int64]int{}
	acked := map[int64]bool{}
	lastByStream := map[string]int64{}
	take := func(d *skaldv1.Delivery) {
		m := d.Message
		s, ok := want[m.GlobalPosition]
		if !ok {
			t.Fatalf("delivered %s gp %d type %s tags %v: it does not match the query", m.Stream, m.GlobalPosition, m.Type, m.Tags)
		}
		if m.Stream != s {
			t.Fatalf("gp %d delivered as of stream %q, want %q", m.GlobalPosition, m.Stream, s)
		}
		if delivered[m.GlobalPosition] == 0 && m.GlobalPosition < lastByStream[s] {
			t.Fatalf("stream %s: gp %d first delivered after %d (pinned keeps order)", s, m.GlobalPosition, lastByStream[s])
		}
		lastByStream[s] = max(lastByStream[s], m.GlobalPosition)
		delivered[m.GlobalPosition]++
	}
	for len(acked) < 4 {
		d := tc.next(t)
		take(d)
		ack(t, cs[2], "vip", d.Message.Id)
		acked[d.Message.GlobalPosition] = true
	}
	// The checkpoint is the lowest matching message not acked (the ones
	// acked need not be the lowest: three streams are in flight at once).
	low := int64(math.MaxInt64)
	for gp := range want {
		if !acked[gp] {
			low = min(low, gp)
		}
	}
	testutil.Eventually(t, waitTimeout, fmt.Sprintf("the checkpoint at %d", low), func() bool {
		g, err := cs[2].subs.GetGroup(context.Background(), connect.NewRequest(&skaldv1.GetGroupRequest{Name: "vip"}))
		return err == nil && g.Msg.Group.Checkpoint == low
	})
	ctx := ctxT(t)
	if err := servers[0].n.TransferLeadership(ctx, servers[2].n.ID()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the new leader", servers[2].n.IsLeader)
	round(1) // written under the new leader
	deadline := time.Now().Add(waitTimeout)
	for len(acked) < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("acked %d of %d matching messages after the leader change", len(acked), len(want))
		}
		select {
		case d := <-tc.got:
			take(d)
			if _, err := cs[0].subs.Ack(ctx, connect.NewRequest(&skaldv1.AckRequest{Group: "vip", Ids: []string{d.Message.Id}})); err == nil {
				acked[d.Message.GlobalPosition] = true
			} else if connect.CodeOf(err) != connect.CodeFailedPrecondition && connect.CodeOf(err) != connect.CodeUnavailable {
				t.Fatalf("ack: %v", err)
			}
		case err := <-tc.done:
			if !errors.Is(err, context.Canceled) && connect.CodeOf(err) != connect.CodeUnavailable {
				t.Fatalf("consumer ended: %v", err)
			}
			tc = startConsumer(t, cs[1], "vip", "c")
		case <-time.After(100 * time.Millisecond):
		}
	}
	for gp := range want {
		if delivered[gp] == 0 {
			t.Fatalf("matching message %d was never delivered", gp)
		}
	}
	if len(want) != 16 {
		t.Fatalf("%d matching messages written, want 16", len(want))
	}
	// Every matching message settled: the checkpoint reaches the head (the
	// non-matching messages after the last match are passed over too).
	head := int64(2 * 4 * 5)
	testutil.Eventually(t, waitTimeout, "the checkpoint at the head", func() bool {
		g, err := cs[1].subs.GetGroup(context.Background(), connect.NewRequest(&skaldv1.GetGroupRequest{Name: "vip"}))
		return err == nil && g.Msg.Group.Checkpoint == head+1
	})
}
