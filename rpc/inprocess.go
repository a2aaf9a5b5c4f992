package rpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/fsm"
)

// Caller is who a call of another wire protocol served in this process
// acts for (rpc/kurrentdb): a credential authenticated by Local, or the
// namespace a listener without authentication is bound to. Its zero
// value acts for nobody and is refused everything.
type Caller struct{ c caller }

// Namespace is the namespace the caller acts on.
func (c Caller) Namespace() string { return c.c.namespace }

// Credential is the name of the caller's credential ("" when bound).
func (c Caller) Credential() string { return c.c.credential }

// Role is the caller's role.
func (c Caller) Role() fsm.Role { return c.c.role }

// Local serves the skald.v1 EventStore to the handlers of another wire
// protocol in this process. Every call authenticates, checks role and
// scope, validates and maps errors exactly as the API port does for the
// same procedure, so a protocol built on it cannot reach more than the
// caller's credential reaches through Connect. Its errors are
// *connect.Error with the API's codes and details.
type Local struct {
	auth authenticator
	es   *eventStore
	subs *subscriptions
}

// NewLocal returns a Local over b. Of opts it reads Logger, Limits and
// Subscribe: the protocol on top counts its own calls.
func NewLocal(b Backend, opts Options) *Local {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	limits := opts.Limits.withDefaults()
	tokens := newUnknownTokens(b.LinearizableIndex, limits.UnknownTokenPace, limits.UnknownTokenTTL)
	metrics := newRPCMetrics(prometheus.NewRegistry()) // AppendStream only, never called here
	subscribe := opts.Subscribe
	if subscribe.ScanBudget <= 0 {
		subscribe.ScanBudget = limits.ScanBudget
	}
	return &Local{
		auth: authenticator{b: b, unknown: tokens, used: &lastUsed{}, audit: newAuditor(log, nil), log: log},
		es: &eventStore{b: b, log: log, sub: subscribe, pageBytes: limits.PageBytes, scanBudget: limits.ScanBudget,
			replyTimeout: limits.WriteTimeout, streamInFlight: limits.AppendStreamInFlight, metrics: metrics,
			hint: leaderHint{b}, creds: b},
		subs: &subscriptions{b: b, log: log},
	}
}

// Authenticate returns the caller of a Skald token: Unauthenticated for
// a malformed, unknown or expired one.
func (l *Local) Authenticate(ctx context.Context, token string) (Caller, error) {
	c, err := l.auth.check(ctx, token)
	if err != nil {
		return Caller{}, err
	}
	return Caller{c}, nil
}

// Bound returns a caller acting on namespace with the owner role and no
// credential: a listener that authenticates nobody, as an operator chose.
func (l *Local) Bound(namespace string) Caller {
	return Caller{caller{namespace: namespace, role: fsm.RoleOwner, home: namespace}}
}

// Permit fails PermissionDenied when c may not call procedure (one of
// skaldv1connect's EventStore procedures) at all, before any request is
// read.
func (l *Local) Permit(c Caller, procedure string) error {
	return permit(c.c, procedure)
}

// PermitRequest fails PermissionDenied when c may not call procedure
// with request m: its role, and its scope against what m touches. A
// stream answered before its first call (a subscription's confirmation)
// checks this first, so a refusal comes before anything is sent.
func (l *Local) PermitRequest(c Caller, procedure string, m any) error {
	if err := permit(c.c, procedure); err != nil {
		return err
	}
	return permitScope(c.c, procedure, m)
}

// call runs fn for c as procedure with request m: role and scope checked
// first, c's credential checked again if it was revoked meanwhile.
func call[Req, Res any](ctx context.Context, l *Local, c Caller, procedure string, m *Req,
	fn func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) (*Res, error) {
	ctx, err := l.admit(ctx, c, procedure, m)
	if err != nil {
		return nil, err
	}
	resp, err := fn(ctx, connect.NewRequest(m))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// admit is what the API port does before a handler runs: c's role and
// scope checked for procedure and request m (PermitRequest), its
// credential checked again in case it was revoked meanwhile; it returns
// ctx carrying c for the handler.
func (l *Local) admit(ctx context.Context, c Caller, procedure string, m any) (context.Context, error) {
	if err := l.PermitRequest(c, procedure, m); err != nil {
		return nil, err
	}
	if err := stillValid(l.auth.b, c.c); err != nil {
		return nil, toConnect(ctx, l.auth.log, err)
	}
	return context.WithValue(ctx, callerKey{}, c.c), nil
}

// Append is EventStore.Append for c.
func (l *Local) Append(ctx context.Context, c Caller, m *skaldv1.AppendRequest) (*skaldv1.AppendResponse, error) {
	return call(ctx, l, c, skaldv1connect.EventStoreAppendProcedure, m, l.es.Append)
}

// ReadStream is EventStore.ReadStream for c.
func (l *Local) ReadStream(ctx context.Context, c Caller, m *skaldv1.ReadStreamRequest) (
	*skaldv1.ReadStreamResponse, error) {
	return call(ctx, l, c, skaldv1connect.EventStoreReadStreamProcedure, m, l.es.ReadStream)
}

// ReadAll is EventStore.ReadAll for c.
func (l *Local) ReadAll(ctx context.Context, c Caller, m *skaldv1.ReadAllRequest) (*skaldv1.ReadAllResponse, error) {
	return call(ctx, l, c, skaldv1connect.EventStoreReadAllProcedure, m, l.es.ReadAll)
}

// StreamVersion is EventStore.StreamVersion for c.
func (l *Local) StreamVersion(ctx context.Context, c Caller, m *skaldv1.StreamVersionRequest) (
	*skaldv1.StreamVersionResponse, error) {
	return call(ctx, l, c, skaldv1connect.EventStoreStreamVersionProcedure, m, l.es.StreamVersion)
}

// DeleteStream is EventStore.DeleteStream for c.
func (l *Local) DeleteStream(ctx context.Context, c Caller, m *skaldv1.DeleteStreamRequest) (
	*skaldv1.DeleteStreamResponse, error) {
	return call(ctx, l, c, skaldv1connect.EventStoreDeleteStreamProcedure, m, l.es.DeleteStream)
}

// Subscribe is EventStore.Subscribe for c: stored matches, caught_up,
// then live matches, each handed to send until ctx ends, send fails or
// the subscription does (its error as the API's). send may block; the
// subscription then holds at most one page of the API's subscribe
// limits, and a live subscriber too far behind is cut off as on the API
// port.
func (l *Local) Subscribe(ctx context.Context, c Caller, m *skaldv1.SubscribeRequest,
	send func(*skaldv1.SubscribeResponse) error) error {
	ctx, err := l.admit(ctx, c, skaldv1connect.EventStoreSubscribeProcedure, m)
	if err != nil {
		return err
	}
	return l.es.subscribe(ctx, m, send)
}

// CreateGroup is Subscriptions.CreateGroup for c.
func (l *Local) CreateGroup(ctx context.Context, c Caller, m *skaldv1.CreateGroupRequest) (
	*skaldv1.CreateGroupResponse, error) {
	return call(ctx, l, c, skaldv1connect.SubscriptionsCreateGroupProcedure, m, l.subs.CreateGroup)
}

// UpdateGroup is Subscriptions.UpdateGroup for c.
func (l *Local) UpdateGroup(ctx context.Context, c Caller, m *skaldv1.UpdateGroupRequest) (
	*skaldv1.UpdateGroupResponse, error) {
	return call(ctx, l, c, skaldv1connect.SubscriptionsUpdateGroupProcedure, m, l.subs.UpdateGroup)
}

// DeleteGroup is Subscriptions.DeleteGroup for c.
func (l *Local) DeleteGroup(ctx context.Context, c Caller, m *skaldv1.DeleteGroupRequest) (
	*skaldv1.DeleteGroupResponse, error) {
	return call(ctx, l, c, skaldv1connect.SubscriptionsDeleteGroupProcedure, m, l.subs.DeleteGroup)
}

// GetGroup is Subscriptions.GetGroup for c.
func (l *Local) GetGroup(ctx context.Context, c Caller, m *skaldv1.GetGroupRequest) (*skaldv1.GetGroupResponse, error) {
	return call(ctx, l, c, skaldv1connect.SubscriptionsGetGroupProcedure, m, l.subs.GetGroup)
}

// ListGroups is Subscriptions.ListGroups for c.
func (l *Local) ListGroups(ctx context.Context, c Caller, m *skaldv1.ListGroupsRequest) (
	*skaldv1.ListGroupsResponse, error) {
	return call(ctx, l, c, skaldv1connect.SubscriptionsListGroupsProcedure, m, l.subs.ListGroups)
}

// Ack is Subscriptions.Ack for c.
func (l *Local) Ack(ctx context.Context, c Caller, m *skaldv1.AckRequest) (*skaldv1.AckResponse, error) {
	return call(ctx, l, c, skaldv1connect.SubscriptionsAckProcedure, m, l.subs.Ack)
}

// Nack is Subscriptions.Nack for c.
func (l *Local) Nack(ctx context.Context, c Caller, m *skaldv1.NackRequest) (*skaldv1.NackResponse, error) {
	return call(ctx, l, c, skaldv1connect.SubscriptionsNackProcedure, m, l.subs.Nack)
}

// ListParked is Subscriptions.ListParked for c.
func (l *Local) ListParked(ctx context.Context, c Caller, m *skaldv1.ListParkedRequest) (
	*skaldv1.ListParkedResponse, error) {
	return call(ctx, l, c, skaldv1connect.SubscriptionsListParkedProcedure, m, l.subs.ListParked)
}

// ReplayParked is Subscriptions.ReplayParked for c.
func (l *Local) ReplayParked(ctx context.Context, c Caller, m *skaldv1.ReplayParkedRequest) (
	*skaldv1.ReplayParkedResponse, error) {
	return call(ctx, l, c, skaldv1connect.SubscriptionsReplayParkedProcedure, m, l.subs.ReplayParked)
}

// Consume is Subscriptions.Consume for c: the consumer's deliveries (and
// heartbeats) handed to send until ctx ends, send fails or the group's
// owner stops. send may block; the group then holds the consumer's
// in-flight limit, no more.
func (l *Local) Consume(ctx context.Context, c Caller, m *skaldv1.ConsumeRequest,
	send func(*skaldv1.ConsumeResponse) error) error {
	ctx, err := l.admit(ctx, c, skaldv1connect.SubscriptionsConsumeProcedure, m)
	if err != nil {
		return err
	}
	return l.subs.consume(ctx, connect.NewRequest(m), send)
}
