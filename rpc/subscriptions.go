package rpc

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// groups is what the Subscriptions service needs from the node.
type groups interface {
	CreateGroup(ctx context.Context, c *fsmv1.CreateGroup) (*fsmv1.Result, error)
	UpdateGroup(ctx context.Context, c *fsmv1.UpdateGroup) (*fsmv1.Result, error)
	DeleteGroup(ctx context.Context, c *fsmv1.DeleteGroup) (*fsmv1.Result, error)
	ReplayParked(ctx context.Context, c *fsmv1.ReplayParked) (*fsmv1.Result, error)
	DeleteParked(ctx context.Context, c *fsmv1.DeleteParked) (*fsmv1.Result, error)
	Consume(ctx context.Context, ns, group, consumer string, deliver func(nodeapi.GroupDelivery) error, heartbeat func() error) error
	Settle(ctx context.Context, ns, group string, ids []string, action nodeapi.SettleAction, reason string) error
	GroupStats(ctx context.Context, ns, group string) (nodeapi.GroupState, bool)
	Read(ctx context.Context, ns string, opts nodeapi.ReadOptions, fn func(*fsm.View) error) (uint64, error)
}

// subscriptions implements skald.v1.Subscriptions on the caller's
// namespace.
type subscriptions struct {
	b   groups
	log *slog.Logger
}

func (s *subscriptions) toConnect(ctx context.Context, err error) error {
	return toConnect(ctx, s.log, ownNamespace(ctx, err))
}

// groupSettings converts the API's settings: unset fields stay zero (the
// default, or on update "keep"); a field set out of range is refused here,
// with the same rule apply enforces.
func groupSettings(in *skaldv1.GroupSettings) (*fsmv1.GroupSettings, error) {
	out := &fsmv1.GroupSettings{}
	if in == nil {
		return out, nil
	}
	out.MaxInFlightPerConsumer, out.MaxInFlight = in.GetMaxInFlightPerConsumer(), in.GetMaxInFlight()
	out.MaxConsumers, out.CheckpointAfter = in.GetMaxConsumers(), in.GetCheckpointAfter()
	out.MaxRetries = in.MaxRetries
	out.Strategy = fsmv1.GroupStrategy(in.Strategy)
	if in.AckTimeout != nil {
		out.AckTimeoutNanos = int64(in.AckTimeout.AsDuration())
	}
	if in.CheckpointInterval != nil {
		out.CheckpointIntervalNanos = int64(in.CheckpointInterval.AsDuration())
	}
	// Every field given must be in range: check them over the defaults.
	probe := fsm.MergeGroupSettings(fsm.DefaultGroupSettings(), out)
	for field, set := range map[string]bool{
		"settings.max_in_flight_per_consumer": in.MaxInFlightPerConsumer != nil && out.MaxInFlightPerConsumer == 0,
		"settings.max_in_flight":              in.MaxInFlight != nil && out.MaxInFlight == 0,
		"settings.max_consumers":              in.MaxConsumers != nil && out.MaxConsumers == 0,
		"settings.checkpoint_after":           in.CheckpointAfter != nil && out.CheckpointAfter == 0,
		"settings.ack_timeout":                in.AckTimeout != nil && out.AckTimeoutNanos == 0,
		"settings.checkpoint_interval":        in.CheckpointInterval != nil && out.CheckpointIntervalNanos == 0,
	} {
		if set { // explicitly zero: out of range, not "default"
			return nil, invalidField(field, "must not be zero (leave it unset for the default)")
		}
	}
	if err := fsm.ValidateGroupSettings(probe); err != nil {
		return nil, asInvalid(err)
	}
	return out, nil
}

func settingsInfo(s *fsmv1.GroupSettings) *skaldv1.GroupSettings {
	return &skaldv1.GroupSettings{
		MaxInFlightPerConsumer: proto.Int32(s.MaxInFlightPerConsumer),
		MaxInFlight:            proto.Int32(s.MaxInFlight),
		AckTimeout:             durationpb.New(time.Duration(s.AckTimeoutNanos)),
		MaxRetries:             proto.Int32(s.GetMaxRetries()),
		MaxConsumers:           proto.Int32(s.MaxConsumers),
		Strategy:               skaldv1.ConsumerStrategy(s.Strategy),
		CheckpointAfter:        proto.Int32(s.CheckpointAfter),
		CheckpointInterval:     durationpb.New(time.Duration(s.CheckpointIntervalNanos)),
	}
}

func (s *subscriptions) groupInfo(ctx context.Context, ns string, r *fsmv1.GroupRecord) *skaldv1.GroupInfo {
	g := &skaldv1.GroupInfo{Name: r.Name, Start: r.Start, Settings: settingsInfo(r.Settings), CreatedAt: timestamp(r.CreatedUnixNano),
		Checkpoint: r.Checkpoint, Parked: r.ParkedCount, Replaying: r.ReplayCount, State: &skaldv1.GroupState{}}
	switch {
	case r.Source.GetStream() != "":
		g.Source = &skaldv1.GroupInfo_Stream{Stream: r.Source.Stream}
	case r.Source.GetCategory() != "":
		g.Source = &skaldv1.GroupInfo_Category{Category: r.Source.Category}
	case r.Source.GetQuery() != nil:
		g.Source = &skaldv1.GroupInfo_Query{Query: queryInfo(r.Source.Query)}
	default:
		g.Source = &skaldv1.GroupInfo_All{All: true}
	}
	if st, ok := s.b.GroupStats(ctx, ns, r.Name); ok {
		g.State = &skaldv1.GroupState{Active: st.Active, Consumers: int32(st.Consumers), InFlight: st.InFlight, Lag: st.Lag,
			Redeliveries: st.Redeliveries, Acked: st.Acked, ParkedSinceStart: st.Parked}
	}
	return g
}

// queryInfo is a stored query as the API's Query.
func queryInfo(q *fsmv1.Query) *skaldv1.Query {
	out := &skaldv1.Query{Items: make([]*skaldv1.QueryItem, len(q.Items))}
	for i, it := range q.Items {
		out.Items[i] = &skaldv1.QueryItem{Types: it.Types, Tags: it.Tags}
	}
	return out
}

func checkGroupName(field, name string) error { return asInvalid(fsm.ValidateGroupName(field, name)) }

func (s *subscriptions) CreateGroup(ctx context.Context, req *connect.Request[skaldv1.CreateGroupRequest]) (*connect.Response[skaldv1.CreateGroupResponse], error) {
	m := req.Msg
	if err := checkGroupName("name", m.Name); err != nil {
		return nil, err
	}
	ns := callerFrom(ctx).namespace
	c := &fsmv1.CreateGroup{Namespace: ns, Name: m.Name, Source: &fsmv1.GroupSource{}}
	switch src := m.Source.(type) {
	case *skaldv1.CreateGroupRequest_Stream:
		if err := checkStream("stream", src.Stream); err != nil {
			return nil, err
		}
		c.Source.Stream = src.Stream
	case *skaldv1.CreateGroupRequest_Category:
		if err := checkCategory("category", src.Category); err != nil {
			return nil, err
		}
		c.Source.Category = src.Category
	case *skaldv1.CreateGroupRequest_All:
		if !src.All {
			return nil, invalidField("all", "must be true when it is the source")
		}
	case *skaldv1.CreateGroupRequest_Query:
		q, err := queryOf("query", src.Query)
		if err != nil {
			return nil, err
		}
		c.Source.Query = q
	default:
		return nil, invalidField("source", "one of stream, category, all or query is required")
	}
	switch st := m.Start.(type) {
	case *skaldv1.CreateGroupRequest_StartGlobalPosition:
		if err := nonNegative("start_global_position", st.StartGlobalPosition); err != nil {
			return nil, err
		}
		if st.StartGlobalPosition > fsm.MaxPosition {
			return nil, invalidField("start_global_position", "must be at most %d, the largest global position, got %d", int64(fsm.MaxPosition), st.StartGlobalPosition)
		}
		c.Start = st.StartGlobalPosition
	case *skaldv1.CreateGroupRequest_StartAtEnd:
		c.StartAtEnd = st.StartAtEnd
	}
	settings, err := groupSettings(m.Settings)
	if err != nil {
		return nil, err
	}
	c.Settings = settings
	res, err := s.b.CreateGroup(ctx, c)
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return connect.NewResponse(&skaldv1.CreateGroupResponse{Group: s.groupInfo(ctx, ns, res.GetGroup().Group), Index: res.Index}), nil
}

func (s *subscriptions) GetGroup(ctx context.Context, req *connect.Request[skaldv1.GetGroupRequest]) (*connect.Response[skaldv1.GetGroupResponse], error) {
	if err := checkGroupName("name", req.Msg.Name); err != nil {
		return nil, err
	}
	var rec *fsmv1.GroupRecord
	applied, err := s.read(ctx, req.Msg.Read, func(v *fsm.View) (err error) {
		if err := groupReadable(ctx, v, skaldv1connect.SubscriptionsGetGroupProcedure, req.Msg.Name); err != nil {
			return err
		}
		rec, err = v.Group(req.Msg.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&skaldv1.GetGroupResponse{Group: s.groupInfo(ctx, callerFrom(ctx).namespace, rec), AppliedIndex: applied}), nil
}

func (s *subscriptions) read(ctx context.Context, o *skaldv1.ReadOptions, fn func(*fsm.View) error) (uint64, error) {
	opts, err := readOptions(o)
	if err != nil {
		return 0, err
	}
	applied, err := s.b.Read(ctx, callerFrom(ctx).namespace, opts, fn)
	if err != nil {
		return 0, s.toConnect(ctx, err)
	}
	return applied, nil
}

func (s *subscriptions) ListGroups(ctx context.Context, req *connect.Request[skaldv1.ListGroupsRequest]) (*connect.Response[skaldv1.ListGroupsResponse], error) {
	var recs []*fsmv1.GroupRecord
	applied, err := s.read(ctx, req.Msg.Read, func(v *fsm.View) (err error) {
		recs, err = v.Groups()
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &skaldv1.ListGroupsResponse{AppliedIndex: applied}
	for _, r := range recs {
		out.Groups = append(out.Groups, s.groupInfo(ctx, callerFrom(ctx).namespace, r))
	}
	return connect.NewResponse(out), nil
}

func (s *subscriptions) UpdateGroup(ctx context.Context, req *connect.Request[skaldv1.UpdateGroupRequest]) (*connect.Response[skaldv1.UpdateGroupResponse], error) {
	if err := checkGroupName("name", req.Msg.Name); err != nil {
		return nil, err
	}
	settings, err := groupSettings(req.Msg.Settings)
	if err != nil {
		return nil, err
	}
	ns := callerFrom(ctx).namespace
	res, err := s.b.UpdateGroup(ctx, &fsmv1.UpdateGroup{Namespace: ns, Name: req.Msg.Name, Settings: settings})
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return connect.NewResponse(&skaldv1.UpdateGroupResponse{Group: s.groupInfo(ctx, ns, res.GetGroup().Group), Index: res.Index}), nil
}

func (s *subscriptions) DeleteGroup(ctx context.Context, req *connect.Request[skaldv1.DeleteGroupRequest]) (*connect.Response[skaldv1.DeleteGroupResponse], error) {
	if err := checkGroupName("name", req.Msg.Name); err != nil {
		return nil, err
	}
	res, err := s.b.DeleteGroup(ctx, &fsmv1.DeleteGroup{Namespace: callerFrom(ctx).namespace, Name: req.Msg.Name})
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return connect.NewResponse(&skaldv1.DeleteGroupResponse{Index: res.Index}), nil
}

// Consume streams the consumer's deliveries until the client leaves or the
// group's owner stops (the client then reconnects: Unavailable).
func (s *subscriptions) Consume(ctx context.Context, req *connect.Request[skaldv1.ConsumeRequest], stream *connect.ServerStream[skaldv1.ConsumeResponse]) error {
	return s.consume(ctx, req, stream.Send)
}

// consume is Consume with each response handed to send (which may block:
// the group holds the consumer's in-flight limit, no more).
func (s *subscriptions) consume(ctx context.Context, req *connect.Request[skaldv1.ConsumeRequest],
	send func(*skaldv1.ConsumeResponse) error) error {
	stream := consumeSend(send)
	if err := checkGroupName("group", req.Msg.Group); err != nil {
		return err
	}
	c := callerFrom(ctx)
	if err := groupAdmits(ctx, s.b, skaldv1connect.SubscriptionsConsumeProcedure, req.Msg.Group); err != nil {
		return s.toConnect(ctx, err)
	}
	err := s.b.Consume(ctx, c.namespace, req.Msg.Group, req.Msg.Consumer, func(d nodeapi.GroupDelivery) error {
		if err := deliveryInScope(c, strings.TrimPrefix(skaldv1connect.SubscriptionsConsumeProcedure, "/"),
			req.Msg.Group, d.Message.Stream); err != nil {
			return err
		}
		return stream.Send(&skaldv1.ConsumeResponse{Event: &skaldv1.ConsumeResponse_Delivery{Delivery: &skaldv1.Delivery{Message: message(&d.Message), Delivery: d.Delivery}}})
	}, func() error {
		return stream.Send(&skaldv1.ConsumeResponse{Event: &skaldv1.ConsumeResponse_Heartbeat{Heartbeat: &skaldv1.Heartbeat{Time: timestamppb.Now()}}})
	})
	if ctx.Err() != nil {
		return nil // the client left
	}
	return s.toConnect(ctx, err)
}

func checkIDs(ids []string) error {
	switch {
	case len(ids) == 0:
		return invalidField("ids", "must list at least one message id")
	case len(ids) > fsm.MaxAppendMessages*10:
		return invalidField("ids", "must list at most %d ids, got %d", fsm.MaxAppendMessages*10, len(ids))
	}
	for i, id := range ids {
		if id == "" {
			return invalidField("ids", "[%d] must not be empty", i)
		}
	}
	return nil
}

func (s *subscriptions) Ack(ctx context.Context, req *connect.Request[skaldv1.AckRequest]) (*connect.Response[skaldv1.AckResponse], error) {
	if err := checkGroupName("group", req.Msg.Group); err != nil {
		return nil, err
	}
	if err := checkIDs(req.Msg.Ids); err != nil {
		return nil, err
	}
	if err := groupAdmits(ctx, s.b, skaldv1connect.SubscriptionsAckProcedure, req.Msg.Group); err != nil {
		return nil, s.toConnect(ctx, err)
	}
	if err := s.b.Settle(ctx, callerFrom(ctx).namespace, req.Msg.Group, req.Msg.Ids, nodeapi.SettleAck, ""); err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return connect.NewResponse(&skaldv1.AckResponse{}), nil
}

func (s *subscriptions) Nack(ctx context.Context, req *connect.Request[skaldv1.NackRequest]) (*connect.Response[skaldv1.NackResponse], error) {
	m := req.Msg
	if err := checkGroupName("group", m.Group); err != nil {
		return nil, err
	}
	if err := checkIDs(m.Ids); err != nil {
		return nil, err
	}
	var action nodeapi.SettleAction
	switch m.Action {
	case skaldv1.NackAction_NACK_ACTION_UNSPECIFIED, skaldv1.NackAction_NACK_ACTION_RETRY:
		action = nodeapi.SettleRetry
	case skaldv1.NackAction_NACK_ACTION_PARK:
		action = nodeapi.SettlePark
	case skaldv1.NackAction_NACK_ACTION_SKIP:
		action = nodeapi.SettleSkip
	default:
		return nil, invalidField("action", "unknown action %d", m.Action)
	}
	if len(m.Reason) > 1024 {
		return nil, invalidField("reason", "must be at most 1024 bytes, got %d", len(m.Reason))
	}
	if err := groupAdmits(ctx, s.b, skaldv1connect.SubscriptionsNackProcedure, m.Group); err != nil {
		return nil, s.toConnect(ctx, err)
	}
	if err := s.b.Settle(ctx, callerFrom(ctx).namespace, m.Group, m.Ids, action, m.Reason); err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return connect.NewResponse(&skaldv1.NackResponse{}), nil
}

func (s *subscriptions) ListParked(ctx context.Context, req *connect.Request[skaldv1.ListParkedRequest]) (*connect.Response[skaldv1.ListParkedResponse], error) {
	m := req.Msg
	if err := checkGroupName("group", m.Group); err != nil {
		return nil, err
	}
	if err := nonNegative("after", m.After); err != nil {
		return nil, err
	}
	limit := int(m.Limit)
	switch {
	case limit == 0:
		limit = 100
	case limit < 0 || limit > fsm.MaxGroupParkedBatch:
		return nil, invalidField("limit", "must be 0..%d, got %d", fsm.MaxGroupParkedBatch, limit)
	}
	out := &skaldv1.ListParkedResponse{}
	applied, err := s.read(ctx, m.Read, func(v *fsm.View) error {
		if err := groupReadable(ctx, v, skaldv1connect.SubscriptionsListParkedProcedure, m.Group); err != nil {
			return err
		}
		rec, err := v.Group(m.Group)
		if err != nil {
			return err
		}
		out.Total = rec.ParkedCount
		parked, err := v.Parked(m.Group, m.After, limit)
		for _, p := range parked {
			out.Messages = append(out.Messages, &skaldv1.ParkedMessage{GlobalPosition: p.GlobalPosition, Id: p.Id, Stream: p.Stream,
				Position: p.Position, Reason: p.Reason, Deliveries: p.Deliveries, ParkedAt: timestamp(p.ParkedUnixNano)})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	out.AppliedIndex = applied
	return connect.NewResponse(out), nil
}

func checkParkedSelection(group string, gps []int64) error {
	if err := checkGroupName("group", group); err != nil {
		return err
	}
	if len(gps) > fsm.MaxGroupParkedBatch {
		return invalidField("global_positions", "must list at most %d, got %d", fsm.MaxGroupParkedBatch, len(gps))
	}
	seen := make(map[int64]bool, len(gps))
	for i, gp := range gps {
		if gp < 1 || seen[gp] {
			return invalidField("global_positions", "[%d] must be a positive global position listed once, got %d", i, gp)
		}
		seen[gp] = true
	}
	return nil
}

func (s *subscriptions) ReplayParked(ctx context.Context, req *connect.Request[skaldv1.ReplayParkedRequest]) (*connect.Response[skaldv1.ReplayParkedResponse], error) {
	m := req.Msg
	if err := checkParkedSelection(m.Group, m.GlobalPositions); err != nil {
		return nil, err
	}
	res, err := s.b.ReplayParked(ctx, &fsmv1.ReplayParked{Namespace: callerFrom(ctx).namespace, Name: m.Group, GlobalPositions: m.GlobalPositions})
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return connect.NewResponse(&skaldv1.ReplayParkedResponse{Replayed: res.GetParkedChange().Changed, Parked: res.GetParkedChange().Parked, Index: res.Index}), nil
}

func (s *subscriptions) DeleteParked(ctx context.Context, req *connect.Request[skaldv1.DeleteParkedRequest]) (*connect.Response[skaldv1.DeleteParkedResponse], error) {
	m := req.Msg
	if err := checkParkedSelection(m.Group, m.GlobalPositions); err != nil {
		return nil, err
	}
	res, err := s.b.DeleteParked(ctx, &fsmv1.DeleteParked{Namespace: callerFrom(ctx).namespace, Name: m.Group, GlobalPositions: m.GlobalPositions})
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return connect.NewResponse(&skaldv1.DeleteParkedResponse{Deleted: res.GetParkedChange().Changed, Parked: res.GetParkedChange().Parked, Index: res.Index}), nil
}

// consumeSend is a send function with a stream's Send method.
type consumeSend func(*skaldv1.ConsumeResponse) error

func (f consumeSend) Send(m *skaldv1.ConsumeResponse) error { return f(m) }
