package client

import (
	"context"
	"errors"
	"iter"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Persistent subscriptions: server-side consumer groups. The server hands
// each message of a group's source to one of its consumers, redelivers
// what is not acknowledged within the ack timeout, and parks what fails
// more than max retries times. Delivery is at least once: a consumer must
// tolerate seeing a message again (after a nack, a timeout, a consumer
// leaving, or a leader change that lost acknowledgements not yet
// checkpointed).

// GroupStrategy is how a group spreads messages over its consumers.
type GroupStrategy int

const (
	// RoundRobin hands each message to the next consumer with room.
	RoundRobin GroupStrategy = iota
	// Pinned sends every message of a stream to one consumer (a hash of
	// the stream name over the connected consumers), one at a time, in
	// order.
	Pinned
)

// GroupSettings bounds a group. Zero fields take the server's default
// (CreateGroup) or keep the current value (UpdateGroup). MaxRetries and
// Strategy are pointers because their zero value is a setting of its own
// (park at the first failure; round robin): nil means unset. Set them
// with WithMaxRetries and WithStrategy rather than by address:
//
//	client.GroupSettings{AckTimeout: 5 * time.Second}.WithMaxRetries(0).WithStrategy(client.Pinned)
type GroupSettings struct {
	MaxInFlightPerConsumer int32         // 1..10000, default 100
	MaxInFlight            int32         // 1..100000, default 1000
	AckTimeout             time.Duration // 100 ms..1 h, default 30 s
	MaxRetries             *int32        // 0..1000, default 10: deliveries after the first before parking
	MaxConsumers           int32         // 1..1000, default 100
	Strategy               *GroupStrategy
	CheckpointAfter        int32         // settled messages per checkpoint, default 100
	CheckpointInterval     time.Duration // default 200 ms
}

// WithMaxRetries returns s with MaxRetries set to n (0..1000: deliveries
// after the first before a message is parked; 0 parks it at its first
// failure).
func (s GroupSettings) WithMaxRetries(n int32) GroupSettings {
	s.MaxRetries = &n
	return s
}

// WithStrategy returns s with Strategy set to st.
func (s GroupSettings) WithStrategy(st GroupStrategy) GroupSettings {
	s.Strategy = &st
	return s
}

func (s GroupSettings) wire() *skaldv1.GroupSettings {
	w := &skaldv1.GroupSettings{MaxRetries: s.MaxRetries}
	opt := func(v int32) *int32 {
		if v == 0 {
			return nil
		}
		return &v
	}
	w.MaxInFlightPerConsumer, w.MaxInFlight = opt(s.MaxInFlightPerConsumer), opt(s.MaxInFlight)
	w.MaxConsumers, w.CheckpointAfter = opt(s.MaxConsumers), opt(s.CheckpointAfter)
	if s.AckTimeout != 0 {
		w.AckTimeout = durationpb.New(s.AckTimeout)
	}
	if s.CheckpointInterval != 0 {
		w.CheckpointInterval = durationpb.New(s.CheckpointInterval)
	}
	if s.Strategy != nil {
		w.Strategy = skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_ROUND_ROBIN
		if *s.Strategy == Pinned {
			w.Strategy = skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED
		}
	}
	return w
}

// GroupSpec describes a new group. Source: at most one of Stream,
// Category or Query (the messages matching it; an untagged message
// matches an item of types alone), none for the whole namespace. Start:
// StartGlobalPosition (0 = from the first message) or StartAtEnd (only
// messages written after the create).
type GroupSpec struct {
	Name                string
	Stream, Category    string
	Query               Query
	StartGlobalPosition int64
	StartAtEnd          bool
	Settings            GroupSettings
}

// GroupInfo is a group as the server reports it.
type GroupInfo struct {
	Name             string
	Stream, Category string // all three empty: the whole namespace
	Query            Query
	Start            int64
	Settings         GroupSettings
	Created          time.Time
	// Checkpoint: every message below this global position is settled
	// (saved through Raft).
	Checkpoint int64
	Parked     int64
	Replaying  int64
	State      GroupState
}

// GroupState is the leader's live view of a group (zero elsewhere, or
// when no consumer is attached).
type GroupState struct {
	Active       bool
	Consumers    int32
	InFlight     int64
	Lag          int64 // queued and in-flight messages the owner holds
	Redeliveries int64
	Acked        int64
	Parked       int64 // parked since the owner started
}

func groupFromWire(g *skaldv1.GroupInfo) GroupInfo {
	s := g.Settings
	strategy := RoundRobin
	if s.GetStrategy() == skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED {
		strategy = Pinned
	}
	out := GroupInfo{Name: g.Name, Stream: g.GetStream(), Category: g.GetCategory(), Start: g.Start, Checkpoint: g.Checkpoint,
		Parked: g.Parked, Replaying: g.Replaying,
		Settings: GroupSettings{MaxInFlightPerConsumer: s.GetMaxInFlightPerConsumer(), MaxInFlight: s.GetMaxInFlight(),
			AckTimeout: s.GetAckTimeout().AsDuration(), MaxRetries: s.MaxRetries, MaxConsumers: s.GetMaxConsumers(), Strategy: &strategy,
			CheckpointAfter: s.GetCheckpointAfter(), CheckpointInterval: s.GetCheckpointInterval().AsDuration()}}
	for _, it := range g.GetQuery().GetItems() {
		out.Query = append(out.Query, QueryItem{Types: it.Types, Tags: it.Tags})
	}
	if g.CreatedAt != nil {
		out.Created = g.CreatedAt.AsTime()
	}
	if st := g.State; st != nil {
		out.State = GroupState{Active: st.Active, Consumers: st.Consumers, InFlight: st.InFlight, Lag: st.Lag,
			Redeliveries: st.Redeliveries, Acked: st.Acked, Parked: st.ParkedSinceStart}
	}
	return out
}

// CreateGroup creates a group of the client's namespace. Not retried when
// its outcome is unknown (a retry could meet its own group:
// ErrAlreadyExists).
//
// Errors: ErrAlreadyExists, ErrInvalidArgument (name, source, a query
// or a setting out of range); nothing was created.
func (c *Client) CreateGroup(ctx context.Context, spec GroupSpec) (GroupInfo, error) {
	req := &skaldv1.CreateGroupRequest{Name: spec.Name, Settings: spec.Settings.wire()}
	n := 0
	for _, set := range []bool{spec.Stream != "", spec.Category != "", spec.Query != nil} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return GroupInfo{}, &Error{Kind: ErrInvalidArgument, Err: errors.New("GroupSpec: set at most one of Stream, Category and Query")}
	case spec.Stream != "":
		req.Source = &skaldv1.CreateGroupRequest_Stream{Stream: spec.Stream}
	case spec.Category != "":
		req.Source = &skaldv1.CreateGroupRequest_Category{Category: spec.Category}
	case spec.Query != nil:
		req.Source = &skaldv1.CreateGroupRequest_Query{Query: spec.Query.wire()}
	default:
		req.Source = &skaldv1.CreateGroupRequest_All{All: true}
	}
	if spec.StartAtEnd {
		req.Start = &skaldv1.CreateGroupRequest_StartAtEnd{StartAtEnd: true}
	} else {
		req.Start = &skaldv1.CreateGroupRequest_StartGlobalPosition{StartGlobalPosition: spec.StartGlobalPosition}
	}
	out, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.CreateGroupResponse], error) {
		return m.subs.CreateGroup(ctx, connect.NewRequest(req))
	})
	if err != nil {
		return GroupInfo{}, err
	}
	return groupFromWire(out.Group), nil
}

// UpdateGroup changes the non-zero settings of group; repeating it
// changes nothing more, so it is retried when its outcome is unknown.
func (c *Client) UpdateGroup(ctx context.Context, group string, settings GroupSettings) (GroupInfo, error) {
	req := &skaldv1.UpdateGroupRequest{Name: group, Settings: settings.wire()}
	out, err := writeReply(ctx, c, removalRetry, func(ctx context.Context, m *member) (*connect.Response[skaldv1.UpdateGroupResponse], error) {
		return m.subs.UpdateGroup(ctx, connect.NewRequest(req))
	})
	if err != nil {
		return GroupInfo{}, err
	}
	return groupFromWire(out.Group), nil
}

// DeleteGroup deletes group with its progress and parked messages.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	_, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.DeleteGroupResponse], error) {
		return m.subs.DeleteGroup(ctx, connect.NewRequest(&skaldv1.DeleteGroupRequest{Name: group}))
	})
	return err
}

// GetGroup reads group (live state when the answering member leads).
func (c *Client) GetGroup(ctx context.Context, group string, opts ...ReadOption) (GroupInfo, error) {
	s := c.settings(opts)
	var out *skaldv1.GetGroupResponse
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.subs.GetGroup(ctx, connect.NewRequest(&skaldv1.GetGroupRequest{Name: group, Read: s.wire(c.session.Load())}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	if err != nil {
		return GroupInfo{}, err
	}
	return groupFromWire(out.Group), nil
}

// ListGroups lists the namespace's groups by name.
func (c *Client) ListGroups(ctx context.Context, opts ...ReadOption) ([]GroupInfo, error) {
	s := c.settings(opts)
	var out *skaldv1.ListGroupsResponse
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.subs.ListGroups(ctx, connect.NewRequest(&skaldv1.ListGroupsRequest{Read: s.wire(c.session.Load())}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	groups := make([]GroupInfo, len(out.Groups))
	for i, g := range out.Groups {
		groups[i] = groupFromWire(g)
	}
	return groups, nil
}

// Delivery is one message handed to a consumer.
type Delivery struct {
	Message
	// Attempt is 1 on the first delivery, then 2, 3, ...
	Attempt int32
}

// Consume attaches a consumer named consumer to group and yields its
// deliveries until ctx ends or the loop breaks. A consumer cut off (the
// leader changed, a member went away) is attached again through any
// member; messages it held and had not acknowledged are delivered again.
// It ends with an error only for a definite refusal (ErrNotFound: no such
// group; ErrResourceExhausted: the group has max_consumers) or when ctx
// ends.
func (c *Client) Consume(ctx context.Context, group, consumer string) iter.Seq2[Delivery, error] {
	return func(yield func(Delivery, error) bool) {
		if c.closed.Load() {
			yield(Delivery{}, ErrClosed)
			return
		}
		tried := map[*member]bool{}
		for round := 0; ; {
			if ctx.Err() != nil {
				yield(Delivery{}, ctx.Err())
				return
			}
			m := c.view.pick(false, tried)
			if m == nil {
				if err := pause(ctx, round); err != nil {
					yield(Delivery{}, err)
					return
				}
				round++
				clear(tried)
				continue
			}
			tried[m] = true
			attached, stop, err := c.consumeOn(ctx, m, group, consumer, yield)
			if stop {
				return
			}
			if attached {
				round = 0
				clear(tried)
			}
			if ctx.Err() != nil {
				continue
			}
			if readVerdict(err) == final && err != nil && connect.CodeOf(err) != connect.CodeUnavailable {
				yield(Delivery{}, serverError(m.url, asConnect(err)))
				return
			}
			if !connect.IsWireError(err) {
				c.view.failed(m)
				c.disc.soon()
			}
		}
	}
}

func (c *Client) consumeOn(ctx context.Context, m *member, group, consumer string, yield func(Delivery, error) bool) (attached, stop bool, err error) {
	stream, err := m.subs.Consume(ctx, connect.NewRequest(&skaldv1.ConsumeRequest{Group: group, Consumer: consumer}))
	if err != nil {
		return false, false, err
	}
	defer stream.Close()
	for stream.Receive() {
		if !attached {
			attached = true
			c.view.answered(m, false)
		}
		if d := stream.Msg().GetDelivery(); d != nil {
			if !yield(Delivery{Message: fromWire(d.Message), Attempt: d.Delivery}, nil) {
				return attached, true, nil
			}
		}
	}
	err = stream.Err()
	if err == nil {
		err = errors.New("skald: consumer stream ended by the server")
	}
	return attached, false, err
}

// NackAction is what Nack does with messages.
type NackAction int

const (
	NackRetry NackAction = iota // deliver again (parked past max retries)
	NackPark                    // park now
	NackSkip                    // settle without processing
)

// Ack settles delivered messages of group by id, all or nothing.
// ErrNotInFlight: some id is not in flight (none was settled).
func (c *Client) Ack(ctx context.Context, group string, ids ...string) error {
	return c.settle(ctx, func(ctx context.Context, m *member) error {
		_, err := m.subs.Ack(ctx, connect.NewRequest(&skaldv1.AckRequest{Group: group, Ids: ids}))
		return err
	})
}

// Nack retries, parks or skips delivered messages of group by id, all or
// nothing; reason is kept with parked messages.
func (c *Client) Nack(ctx context.Context, group string, action NackAction, reason string, ids ...string) error {
	a := map[NackAction]skaldv1.NackAction{NackRetry: skaldv1.NackAction_NACK_ACTION_RETRY, NackPark: skaldv1.NackAction_NACK_ACTION_PARK,
		NackSkip: skaldv1.NackAction_NACK_ACTION_SKIP}[action]
	return c.settle(ctx, func(ctx context.Context, m *member) error {
		_, err := m.subs.Nack(ctx, connect.NewRequest(&skaldv1.NackRequest{Group: group, Ids: ids, Action: a, Reason: reason}))
		return err
	})
}

// settle sends an ack or nack to any member (it reaches the leader). An
// unanswered one is not sent again: the message is then delivered again.
func (c *Client) settle(ctx context.Context, try attempt) error {
	return settleError(c.write(ctx, nil, try))
}

// ParkedMessage is a message a group parked.
type ParkedMessage struct {
	GlobalPosition int64
	ID             string
	Stream         string
	Position       int64
	Reason         string
	Deliveries     int32
	Parked         time.Time
}

// ListParked lists up to limit (0: 100) parked messages of group after
// global position after, and how many the group has parked in all.
func (c *Client) ListParked(ctx context.Context, group string, after int64, limit int32, opts ...ReadOption) ([]ParkedMessage, int64, error) {
	s := c.settings(opts)
	var out *skaldv1.ListParkedResponse
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.subs.ListParked(ctx, connect.NewRequest(&skaldv1.ListParkedRequest{Group: group, After: after, Limit: limit, Read: s.wire(c.session.Load())}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	msgs := make([]ParkedMessage, len(out.Messages))
	for i, p := range out.Messages {
		msgs[i] = ParkedMessage{GlobalPosition: p.GlobalPosition, ID: p.Id, Stream: p.Stream, Position: p.Position, Reason: p.Reason,
			Deliveries: p.Deliveries, Parked: p.ParkedAt.AsTime()}
	}
	return msgs, out.Total, nil
}

// ReplayParked puts parked messages of group (all when none given, up to
// 1000 per call) back into it: they are delivered again before new ones.
// It returns how many moved and how many stay parked.
func (c *Client) ReplayParked(ctx context.Context, group string, globalPositions ...int64) (replayed, parked int64, err error) {
	out, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.ReplayParkedResponse], error) {
		return m.subs.ReplayParked(ctx, connect.NewRequest(&skaldv1.ReplayParkedRequest{Group: group, GlobalPositions: globalPositions}))
	})
	if err != nil {
		return 0, 0, err
	}
	return out.Replayed, out.Parked, nil
}

// DeleteParked forgets parked messages of group (all when none given, up
// to 1000 per call). It returns how many went and how many stay parked.
func (c *Client) DeleteParked(ctx context.Context, group string, globalPositions ...int64) (deleted, parked int64, err error) {
	out, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.DeleteParkedResponse], error) {
		return m.subs.DeleteParked(ctx, connect.NewRequest(&skaldv1.DeleteParkedRequest{Group: group, GlobalPositions: globalPositions}))
	})
	if err != nil {
		return 0, 0, err
	}
	return out.Deleted, out.Parked, nil
}
