package kurrentdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/persistent"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/rpc"
)

// Persistent subscriptions are Skald consumer groups (groupName names
// them). Every call goes through rpc.Local's Subscriptions methods, so
// roles, scopes, validation and limits are the API port's.

// maxConsumers is Skald's largest subscriber limit, which KurrentDB's
// "unlimited" (0) becomes.
const maxConsumers = 1000

// ticksPerMilli is the number of 100 ns ticks in a millisecond.
const ticksPerMilli = 10_000

// psSettings is what KurrentDB's create and update settings have in
// common and Skald keeps.
type psSettings struct {
	maxRetry, maxCheckpoint, maxSubscribers int32
	timeoutMs, checkpointMs                 int64
	strategy                                string
}

// groupSettings maps s onto a Skald group's settings: retry count to
// max_retries, message timeout to ack_timeout, checkpoint_after to
// checkpoint_interval, the max checkpoint count to checkpoint_after,
// the subscriber limit to max_consumers (0, unlimited: Skald's largest),
// RoundRobin and Pinned to Skald's strategies. Zero timeouts keep
// Skald's defaults. A strategy Skald has no counterpart for is refused.
func (p psSettings) groupSettings() (*skaldv1.GroupSettings, error) {
	out := &skaldv1.GroupSettings{}
	switch p.strategy {
	case "", "RoundRobin":
		out.Strategy = skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_ROUND_ROBIN
	case "Pinned":
		out.Strategy = skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED
	case "DispatchToSingle", "PinnedByCorrelation":
		return nil, invalid("consumer strategy %s has no counterpart in Skald's consumer groups: use RoundRobin or Pinned "+
			"(Pinned keeps each stream's events on one subscriber, in order)", p.strategy)
	default:
		return nil, invalid("unknown consumer strategy %q: use RoundRobin or Pinned", p.strategy)
	}
	if p.maxRetry < 0 {
		return nil, invalid("max retry count %d is negative", p.maxRetry)
	}
	out.MaxRetries = proto.Int32(p.maxRetry)
	if p.maxCheckpoint > 0 {
		out.CheckpointAfter = proto.Int32(p.maxCheckpoint)
	}
	switch {
	case p.maxSubscribers < 0:
		return nil, invalid("max subscriber count %d is negative", p.maxSubscribers)
	case p.maxSubscribers == 0:
		out.MaxConsumers = proto.Int32(maxConsumers)
	default:
		out.MaxConsumers = proto.Int32(p.maxSubscribers)
	}
	if p.timeoutMs > 0 {
		out.AckTimeout = durationpb.New(time.Duration(p.timeoutMs) * time.Millisecond)
	}
	if p.checkpointMs > 0 {
		out.CheckpointInterval = durationpb.New(time.Duration(p.checkpointMs) * time.Millisecond)
	}
	return out, nil
}

// createSettings reads a Create's settings.
func createSettings(s *persistent.CreateReq_Settings) psSettings {
	p := psSettings{maxRetry: s.GetMaxRetryCount(), maxCheckpoint: s.GetMaxCheckpointCount(),
		maxSubscribers: s.GetMaxSubscriberCount(), strategy: s.GetConsumerStrategy()}
	if p.strategy == "" && s != nil {
		p.strategy = s.GetNamedConsumerStrategy().String()
	}
	p.timeoutMs = s.GetMessageTimeoutTicks() / ticksPerMilli
	if s.GetMessageTimeoutMs() != 0 {
		p.timeoutMs = int64(s.GetMessageTimeoutMs())
	}
	p.checkpointMs = s.GetCheckpointAfterTicks() / ticksPerMilli
	if s.GetCheckpointAfterMs() != 0 {
		p.checkpointMs = int64(s.GetCheckpointAfterMs())
	}
	return p
}

// updateSettings reads an Update's settings.
func updateSettings(s *persistent.UpdateReq_Settings) psSettings {
	p := psSettings{maxRetry: s.GetMaxRetryCount(), maxCheckpoint: s.GetMaxCheckpointCount(),
		maxSubscribers: s.GetMaxSubscriberCount(), strategy: s.GetNamedConsumerStrategy().String()}
	p.timeoutMs = s.GetMessageTimeoutTicks() / ticksPerMilli
	if s.GetMessageTimeoutMs() != 0 {
		p.timeoutMs = int64(s.GetMessageTimeoutMs())
	}
	p.checkpointMs = s.GetCheckpointAfterTicks() / ticksPerMilli
	if s.GetCheckpointAfterMs() != 0 {
		p.checkpointMs = int64(s.GetCheckpointAfterMs())
	}
	return p
}

// psError is err of a Skald group call as KurrentDB answers it: a
// missing group is persistent-subscription-does-not-exist, an existing
// one persistent-subscription-exists, each with its companion trailers.
func psError(err error, stream, group, format string, args ...any) error {
	out := fromSkald(err, format, args...)
	var ce *connect.Error
	if !errors.As(out, &ce) {
		return out
	}
	switch ce.Code() {
	case connect.CodeNotFound:
		ce.Meta().Set("exception", "persistent-subscription-does-not-exist")
	case connect.CodeAlreadyExists:
		ce.Meta().Set("exception", "persistent-subscription-exists")
	default:
		return ce
	}
	ce.Meta().Set("stream-name", stream)
	ce.Meta().Set("group-name", group)
	return ce
}

// psCaller is the admitted caller of ctx.
func psCaller(ctx context.Context) (rpc.Caller, error) {
	c, ok := callerFrom(ctx)
	if !ok {
		return rpc.Caller{}, connect.NewError(connect.CodeUnauthenticated, errors.New("no caller admitted"))
	}
	return c, nil
}

// psOptions are the options that name one persistent subscription.
type psOptions interface {
	GetStreamIdentifier() *shared.StreamIdentifier
	GetGroupName() string
}

// psGroup is the stream (or $all) that o names and the Skald group that
// serves its persistent subscription.
func psGroup(o psOptions, all bool) (stream, name string, err error) {
	if stream, err = streamOf(o.GetStreamIdentifier(), all); err != nil {
		return "", "", err
	}
	name, err = groupName(stream, o.GetGroupName())
	return stream, name, err
}

// streamOf is the name of a stream identifier, or $all when all.
func streamOf(id *shared.StreamIdentifier, all bool) (string, error) {
	if all {
		return allStream, nil
	}
	name := string(id.GetStreamName())
	if name == "" {
		return "", invalid("a persistent subscription names a stream or $all")
	}
	return name, nil
}

// psCreate serves PersistentSubscriptions.Create: a Skald group on the
// stream, or on the namespace (or one category, for a $all filter on one
// stream-name prefix "<category>-"), starting where asked.
func (s *Server) psCreate(ctx context.Context, req *connect.Request[persistent.CreateReq]) (
	*connect.Response[persistent.CreateResp], error) {
	c, err := psCaller(ctx)
	if err != nil {
		return nil, err
	}
	o := req.Msg.GetOptions()
	settings, err := createSettings(o.GetSettings()).groupSettings()
	if err != nil {
		return nil, err
	}
	m := &skaldv1.CreateGroupRequest{Settings: settings}
	var stream string
	switch so := o.GetStreamOption().(type) {
	case *persistent.CreateReq_Options_Stream:
		if stream, err = streamOf(so.Stream.GetStreamIdentifier(), false); err != nil {
			return nil, err
		}
		m.Source = &skaldv1.CreateGroupRequest_Stream{Stream: stream}
		if err := s.streamGroupStart(ctx, c, m, so.Stream); err != nil {
			return nil, err
		}
	case *persistent.CreateReq_Options_All:
		stream = allStream
		if err := allGroupSource(m, so.All.GetFilter()); err != nil {
			return nil, err
		}
		switch v := so.All.GetAllOption().(type) {
		case *persistent.CreateReq_AllOptions_Start:
			m.Start = &skaldv1.CreateGroupRequest_StartGlobalPosition{StartGlobalPosition: 1}
		case *persistent.CreateReq_AllOptions_End:
			m.Start = &skaldv1.CreateGroupRequest_StartAtEnd{StartAtEnd: true}
		case *persistent.CreateReq_AllOptions_Position:
			p := v.Position.GetCommitPosition()
			if p > 1<<62 {
				return nil, invalid("position %d of $all is past any position", p)
			}
			m.Start = &skaldv1.CreateGroupRequest_StartGlobalPosition{StartGlobalPosition: max(int64(p), 1)}
		default:
			return nil, invalid("a persistent subscription to $all starts at its start, its end or a position")
		}
	default:
		if o.GetStreamIdentifier() == nil { // the deprecated field, which no current client sends alone
			return nil, invalid("a persistent subscription names a stream or $all")
		}
		return nil, invalid("a persistent subscription gives its stream options (stream or all)")
	}
	if m.Name, err = groupName(stream, o.GetGroupName()); err != nil {
		return nil, err
	}
	if _, err := s.local.CreateGroup(ctx, c, m); err != nil {
		return nil, psError(err, stream, o.GetGroupName(), "create persistent subscription %q on %q",
			o.GetGroupName(), stream)
	}
	return connect.NewResponse(&persistent.CreateResp{}), nil
}

// streamGroupStart sets where a stream group starts: Skald's groups
// start at a global position, so a revision is the global position of
// the stream's event at it (or the end, if the stream has no such event
// yet).
func (s *Server) streamGroupStart(ctx context.Context, c rpc.Caller, m *skaldv1.CreateGroupRequest,
	o *persistent.CreateReq_StreamOptions) error {
	switch v := o.GetRevisionOption().(type) {
	case *persistent.CreateReq_StreamOptions_Start:
		m.Start = &skaldv1.CreateGroupRequest_StartGlobalPosition{StartGlobalPosition: 1}
	case *persistent.CreateReq_StreamOptions_End:
		m.Start = &skaldv1.CreateGroupRequest_StartAtEnd{StartAtEnd: true}
	case *persistent.CreateReq_StreamOptions_Revision:
		stream := string(o.GetStreamIdentifier().GetStreamName())
		if v.Revision > 1<<62 {
			return invalid("revision %d of %q is past any revision", v.Revision, stream)
		}
		page, err := s.local.ReadStream(ctx, c, &skaldv1.ReadStreamRequest{Stream: stream, Position: int64(v.Revision),
			Limit: 1})
		if err != nil {
			return fromSkald(err, "read revision %d of %q", v.Revision, stream)
		}
		if msgs := page.GetMessages(); len(msgs) > 0 {
			m.Start = &skaldv1.CreateGroupRequest_StartGlobalPosition{StartGlobalPosition: msgs[0].GetGlobalPosition()}
		} else {
			m.Start = &skaldv1.CreateGroupRequest_StartAtEnd{StartAtEnd: true}
		}
	default:
		return invalid("a persistent subscription to a stream starts at its start, its end or a revision")
	}
	return nil
}

// allGroupSource sets the source of a $all group: the namespace, or for
// a filter on one stream-name prefix "<category>-" (a category holds
// the streams "<category>-...") that category. Skald's groups have no
// other filter, so any other is refused.
func allGroupSource(m *skaldv1.CreateGroupRequest, f *persistent.CreateReq_AllOptions_FilterOptions) error {
	if f == nil {
		m.Source = &skaldv1.CreateGroupRequest_All{All: true}
		return nil
	}
	const why = "a Skald consumer group reads a stream, a category or the whole namespace: a $all filter maps " +
		"only to one stream-name prefix \"<category>-\" (the category's streams)"
	id, ok := f.GetFilter().(*persistent.CreateReq_AllOptions_FilterOptions_StreamIdentifier)
	if !ok || id.StreamIdentifier.GetRegex() != "" || len(id.StreamIdentifier.GetPrefix()) != 1 {
		return invalid("this filter cannot be served: %s", why)
	}
	category, ok := strings.CutSuffix(id.StreamIdentifier.GetPrefix()[0], "-")
	if !ok || category == "" || strings.Contains(category, "-") {
		return invalid("stream-name prefix %q cannot be served: %s", id.StreamIdentifier.GetPrefix()[0], why)
	}
	m.Source = &skaldv1.CreateGroupRequest_Category{Category: category}
	return nil
}

// psUpdate serves PersistentSubscriptions.Update: the group's settings.
// Skald keeps a group's start, so a new start point is not applied.
func (s *Server) psUpdate(ctx context.Context, req *connect.Request[persistent.UpdateReq]) (
	*connect.Response[persistent.UpdateResp], error) {
	c, err := psCaller(ctx)
	if err != nil {
		return nil, err
	}
	o := req.Msg.GetOptions()
	var stream string
	switch so := o.GetStreamOption().(type) {
	case *persistent.UpdateReq_Options_Stream:
		stream, err = streamOf(so.Stream.GetStreamIdentifier(), false)
	case *persistent.UpdateReq_Options_All:
		stream = allStream
	default:
		err = invalid("a persistent subscription update names a stream or $all")
	}
	if err != nil {
		return nil, err
	}
	settings, err := updateSettings(o.GetSettings()).groupSettings()
	if err != nil {
		return nil, err
	}
	name, err := groupName(stream, o.GetGroupName())
	if err != nil {
		return nil, err
	}
	if _, err := s.local.UpdateGroup(ctx, c, &skaldv1.UpdateGroupRequest{Name: name, Settings: settings}); err != nil {
		return nil, psError(err, stream, o.GetGroupName(), "update persistent subscription %q on %q",
			o.GetGroupName(), stream)
	}
	return connect.NewResponse(&persistent.UpdateResp{}), nil
}

// psDelete serves PersistentSubscriptions.Delete.
func (s *Server) psDelete(ctx context.Context, req *connect.Request[persistent.DeleteReq]) (
	*connect.Response[persistent.DeleteResp], error) {
	c, err := psCaller(ctx)
	if err != nil {
		return nil, err
	}
	o := req.Msg.GetOptions()
	stream, name, err := psGroup(o, o.GetAll() != nil)
	if err != nil {
		return nil, err
	}
	if _, err := s.local.DeleteGroup(ctx, c, &skaldv1.DeleteGroupRequest{Name: name}); err != nil {
		return nil, psError(err, stream, o.GetGroupName(), "delete persistent subscription %q on %q",
			o.GetGroupName(), stream)
	}
	return connect.NewResponse(&persistent.DeleteResp{}), nil
}

// psGetInfo serves PersistentSubscriptions.GetInfo with the group's
// stored and live figures.
func (s *Server) psGetInfo(ctx context.Context, req *connect.Request[persistent.GetInfoReq]) (
	*connect.Response[persistent.GetInfoResp], error) {
	c, err := psCaller(ctx)
	if err != nil {
		return nil, err
	}
	o := req.Msg.GetOptions()
	stream, name, err := psGroup(o, o.GetAll() != nil)
	if err != nil {
		return nil, err
	}
	g, err := s.local.GetGroup(ctx, c, &skaldv1.GetGroupRequest{Name: name})
	if err != nil {
		return nil, psError(err, stream, o.GetGroupName(), "persistent subscription %q on %q", o.GetGroupName(), stream)
	}
	return connect.NewResponse(&persistent.GetInfoResp{
		SubscriptionInfo: subscriptionInfo(stream, o.GetGroupName(), g.GetGroup())}), nil
}

// psList serves PersistentSubscriptions.List: every group made through
// this protocol, or those of one stream (or of $all).
func (s *Server) psList(ctx context.Context, req *connect.Request[persistent.ListReq]) (
	*connect.Response[persistent.ListResp], error) {
	c, err := psCaller(ctx)
	if err != nil {
		return nil, err
	}
	only := ""
	if f := req.Msg.GetOptions().GetListForStream(); f != nil {
		if only, err = streamOf(f.GetStream(), f.GetAll() != nil); err != nil {
			return nil, err
		}
	}
	groups, err := s.local.ListGroups(ctx, c, &skaldv1.ListGroupsRequest{})
	if err != nil {
		return nil, fromSkald(err, "list persistent subscriptions")
	}
	out := &persistent.ListResp{}
	for _, g := range groups.GetGroups() {
		stream, group, ok := parseGroupName(g.GetName())
		if !ok || (only != "" && stream != only) {
			continue
		}
		out.Subscriptions = append(out.Subscriptions, subscriptionInfo(stream, group, g))
	}
	if only != "" && len(out.Subscriptions) == 0 {
		// KurrentDB answers a stream without subscriptions so.
		return nil, psError(connect.NewError(connect.CodeNotFound, fmt.Errorf("no persistent subscription on %q", only)),
			only, "", "list persistent subscriptions")
	}
	return connect.NewResponse(out), nil
}

// subscriptionInfo is a Skald group as KurrentDB's SubscriptionInfo.
// Positions are "C:p/P:p" for $all; a stream group's revisions are not
// kept by Skald (it works in global positions), so its last checkpoint
// is not reported.
func subscriptionInfo(stream, group string, g *skaldv1.GroupInfo) *persistent.SubscriptionInfo {
	st, set := g.GetState(), g.GetSettings()
	info := &persistent.SubscriptionInfo{
		EventSource: stream, GroupName: group, Status: "Live",
		TotalItems: st.GetAcked(), ParkedMessageCount: g.GetParked(),
		TotalInFlightMessages: int32(st.GetInFlight()), OutstandingMessagesCount: int32(st.GetInFlight()),
		MessageTimeoutMilliseconds:  int32(set.GetAckTimeout().AsDuration().Milliseconds()),
		MaxRetryCount:               set.GetMaxRetries(),
		CheckPointAfterMilliseconds: int32(set.GetCheckpointInterval().AsDuration().Milliseconds()),
		MinCheckPointCount:          set.GetCheckpointAfter(), MaxCheckPointCount: set.GetCheckpointAfter(),
		MaxSubscriberCount: set.GetMaxConsumers(), NamedConsumerStrategy: "RoundRobin",
		RetryBufferCount: int32(g.GetReplaying()),
	}
	if !st.GetActive() {
		info.Status = "Idle"
	}
	if set.GetStrategy() == skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED {
		info.NamedConsumerStrategy = "Pinned"
	}
	for i := range int(st.GetConsumers()) {
		id := "consumer-" + strconv.Itoa(i+1)
		info.Connections = append(info.Connections, &persistent.SubscriptionInfo_ConnectionInfo{From: id, ConnectionName: id})
	}
	all := stream == allStream
	switch {
	case g.GetStart() <= 1 && all:
		info.StartFrom = "C:0/P:0"
	case g.GetStart() <= 1:
		info.StartFrom = "0"
	case all:
		info.StartFrom = position(g.GetStart())
	default:
		info.StartFrom = "-1" // a stream group past the namespace's start: its revision is not kept
	}
	if all && g.GetCheckpoint() > 1 {
		info.LastCheckpointedEventPosition = position(g.GetCheckpoint() - 1)
	}
	return info
}

// position is a $all position as KurrentDB writes it in SubscriptionInfo.
func position(gp int64) string { return fmt.Sprintf("C:%d/P:%d", gp, gp) }

// psReplayParked serves PersistentSubscriptions.ReplayParked: every
// parked message, or the first stop_at of them, back to the group.
func (s *Server) psReplayParked(ctx context.Context, req *connect.Request[persistent.ReplayParkedReq]) (
	*connect.Response[persistent.ReplayParkedResp], error) {
	c, err := psCaller(ctx)
	if err != nil {
		return nil, err
	}
	o := req.Msg.GetOptions()
	stream, name, err := psGroup(o, o.GetAll() != nil)
	if err != nil {
		return nil, err
	}
	fail := func(err error) error {
		return psError(err, stream, o.GetGroupName(), "replay the parked messages of %q on %q", o.GetGroupName(), stream)
	}
	if v, ok := o.GetStopAtOption().(*persistent.ReplayParkedReq_Options_StopAt); ok && v.StopAt >= 0 {
		if v.StopAt == 0 {
			return connect.NewResponse(&persistent.ReplayParkedResp{}), nil
		}
		limit := min(v.StopAt, maxParkedBatch)
		parked, err := s.local.ListParked(ctx, c, &skaldv1.ListParkedRequest{Group: name, Limit: int32(limit)})
		if err != nil {
			return nil, fail(err)
		}
		var gps []int64
		for _, p := range parked.GetMessages() {
			gps = append(gps, p.GetGlobalPosition())
		}
		if len(gps) == 0 {
			return connect.NewResponse(&persistent.ReplayParkedResp{}), nil
		}
		replay := &skaldv1.ReplayParkedRequest{Group: name, GlobalPositions: gps}
		if _, err := s.local.ReplayParked(ctx, c, replay); err != nil {
			return nil, fail(err)
		}
		return connect.NewResponse(&persistent.ReplayParkedResp{}), nil
	}
	// Every parked message: Skald replays a batch per call.
	for range maxReplayCalls {
		res, err := s.local.ReplayParked(ctx, c, &skaldv1.ReplayParkedRequest{Group: name})
		if err != nil {
			return nil, fail(err)
		}
		if res.GetReplayed() == 0 || res.GetParked() == 0 {
			break
		}
	}
	return connect.NewResponse(&persistent.ReplayParkedResp{}), nil
}

// Bounds of one ReplayParked: Skald's batch, and the batches of one call.
const (
	maxParkedBatch = 1000
	maxReplayCalls = 100
)

// psRestart serves PersistentSubscriptions.RestartSubsystem for a caller
// who may manage groups. Skald's groups have no subsystem to restart
// (each group's owner runs on the leader and moves with it), so it
// changes nothing.
func (s *Server) psRestart(ctx context.Context, _ *connect.Request[shared.Empty]) (
	*connect.Response[shared.Empty], error) {
	c, err := psCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.local.Permit(c, skaldv1connect.SubscriptionsUpdateGroupProcedure); err != nil {
		return nil, fromSkald(err, "restart the persistent subscription subsystem")
	}
	return connect.NewResponse(&shared.Empty{}), nil
}
