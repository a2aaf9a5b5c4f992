package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/rpc/evdb"
)

// reply is one node or state-machine error as both APIs answer it:
// Connect's code, message and details, and EventoDB's HTTP status, code,
// message and details (docs/api.md, Errors; docs/eventodb-api.md §9).
type reply struct {
	code    connect.Code
	status  int    // EventoDB's HTTP status
	evCode  string // EventoDB's error code
	message string // the public message (with cause: the prefix of the error's own text)
	// cause: the message is message followed by the error's own text, and
	// the Connect error wraps the error (errors.Is still sees the sentinel).
	cause     bool
	evMessage string // EventoDB's message, when it differs from message
	details   []proto.Message
	evDetails map[string]any
	// verdict: the state machine decided. It stands even when the call's
	// deadline has passed; any other error then becomes DeadlineExceeded
	// on Connect.
	verdict bool
	// notApplied: the node certainly proposed nothing (it refused before
	// Raft), so a client may send the write again without applying it
	// twice. Both surfaces say so in a field clients read instead of the
	// message: OutcomeHeader on Connect, "outcome" in EventoDB's error.
	notApplied bool
}

// OutcomeHeader is the Connect error metadata (an HTTP header or
// trailer) that says what became of a write the server refused:
// OutcomeNotApplied when nothing was proposed. EventoDB's error body
// carries the same value as "outcome". Absent: the reply says nothing
// about it (a verdict is final anyway; Unavailable without it may have
// been applied).
const (
	OutcomeHeader     = "Skald-Outcome"
	OutcomeNotApplied = evdb.OutcomeNotApplied
)

// internalReply answers an error the table does not know; the error
// itself is logged, never sent.
var internalReply = reply{code: connect.CodeInternal, status: http.StatusInternalServerError, evCode: "BACKEND_ERROR",
	message: "internal error", evMessage: "storage error"}

// errorTable is the one map from node and state-machine errors to what
// both APIs answer. Rows are tried in order and the first match wins:
// typed errors (errors.As), then sentinels (errors.Is). INVARIANT: every
// verdict row comes before every other row, so an error that wraps both
// is answered as the verdict. Both surfaces only translate a reply into
// their shape (toConnect, eventodb.backendError); neither maps an error of
// its own. TestErrorTable pins every row's reply on both surfaces.
var errorTable = []func(error) (reply, bool){
	typed(func(e *fsm.DuplicateIDError) reply {
		return reply{verdict: true, code: connect.CodeAlreadyExists, status: http.StatusConflict, evCode: "DUPLICATE_MESSAGE_ID", message: e.Describe(),
			details: []proto.Message{&skaldv1.DuplicateMessageId{Message: int32(e.Message), Field: e.Field, Id: e.ID, Stream: e.Stream,
				Position: e.Position, GlobalPosition: e.GlobalPosition, Reason: string(e.Reason)}},
			evDetails: map[string]any{"id": e.ID, "stream": e.Stream, "position": e.Position, "globalPosition": e.GlobalPosition, "reason": string(e.Reason)}}
	}),
	typed(func(e *fsm.ValidationError) reply { return invalidReply(e.Field, e.Reason) }),
	typed(func(e *badTokenError) reply {
		if e.err != nil {
			r := invalidReply("token", e.err.Error())
			r.evMessage = "option token: " + e.err.Error()
			return r
		}
		r := invalidReply("token", fmt.Sprintf("names namespace %q, not %q", e.named, e.want))
		r.evMessage = fmt.Sprintf("option token names namespace %q, not %q", e.named, e.want)
		return r
	}),
	typed(func(e *fsm.VersionConflictsError) reply {
		d := &skaldv1.VersionConflicts{}
		ev := make([]map[string]any, 0, len(e.Conflicts))
		for _, c := range e.Conflicts {
			d.Conflicts = append(d.Conflicts, &skaldv1.VersionConflict{Stream: c.Stream, ExpectedVersion: c.Expected, ActualVersion: c.Actual})
			ev = append(ev, map[string]any{"stream": c.Stream, "expected": c.Expected, "actual": c.Actual})
		}
		return reply{verdict: true, code: connect.CodeAborted, status: http.StatusConflict, evCode: "STREAM_VERSION_CONFLICT", message: e.Describe(),
			details: []proto.Message{d}, evDetails: map[string]any{"conflicts": ev}}
	}),
	typed(func(e *fsm.VersionConflictError) reply {
		return reply{verdict: true, code: connect.CodeAborted, status: http.StatusConflict, evCode: "STREAM_VERSION_CONFLICT",
			message:   fmt.Sprintf("stream %q is at version %d, expected %d", e.Stream, e.Actual, e.Expected),
			evMessage: fmt.Sprintf("Expected version %d, stream is at version %d", e.Expected, e.Actual),
			details:   []proto.Message{&skaldv1.VersionConflict{Stream: e.Stream, ExpectedVersion: e.Expected, ActualVersion: e.Actual}},
			evDetails: map[string]any{"expected": e.Expected, "actual": e.Actual}}
	}),
	typed(func(e *fsm.ConditionFailedError) reply {
		return reply{verdict: true, code: connect.CodeFailedPrecondition, status: http.StatusConflict, evCode: "CONDITION_FAILED", message: e.Describe(),
			details:   []proto.Message{&skaldv1.ConditionFailed{GlobalPosition: e.GlobalPosition, After: e.After}},
			evDetails: map[string]any{"globalPosition": e.GlobalPosition, "after": e.After}}
	}),
	typed(func(e *namespaceGoneError) reply {
		return reply{verdict: true, code: connect.CodeUnauthenticated, status: http.StatusForbidden, evCode: "AUTH_UNAUTHORIZED",
			message: "the token's namespace no longer exists", evDetails: map[string]any{"namespace": e.namespace}}
	}),
	typed(func(e *namespaceNotFoundError) reply {
		return reply{verdict: true, code: connect.CodeNotFound, status: http.StatusNotFound, evCode: "NAMESPACE_NOT_FOUND",
			message: "namespace not found", evMessage: fmt.Sprintf("namespace %q not found", e.name)}
	}),
	typed(func(e *permissionError) reply {
		return reply{verdict: true, code: connect.CodePermissionDenied, status: http.StatusForbidden, evCode: "AUTH_UNAUTHORIZED", message: e.msg}
	}),
	typed(func(e *expiredError) reply {
		return reply{verdict: true, code: connect.CodeUnauthenticated, status: http.StatusForbidden, evCode: "AUTH_UNAUTHORIZED", message: e.Error(),
			evDetails: map[string]any{"namespace": e.namespace, "credential": e.credential}}
	}),
	typed(func(e *revokedError) reply {
		return reply{verdict: true, code: connect.CodeUnauthenticated, status: http.StatusForbidden, evCode: "AUTH_UNAUTHORIZED", message: e.Error(),
			evDetails: map[string]any{"namespace": e.namespace, "credential": e.credential}}
	}),
	sentinel(fsm.ErrCredentialNotFound, reply{verdict: true, code: connect.CodeNotFound, status: http.StatusNotFound, evCode: "CREDENTIAL_NOT_FOUND",
		cause: true}),
	sentinel(fsm.ErrCredentialExists, reply{verdict: true, code: connect.CodeAlreadyExists, status: http.StatusConflict, evCode: "CREDENTIAL_EXISTS",
		cause: true}),
	typed(func(e *fsm.NamespaceLimitError) reply {
		return reply{verdict: true, code: connect.CodeResourceExhausted, status: http.StatusTooManyRequests, evCode: "NAMESPACE_LIMIT",
			message: e.Describe(), evDetails: map[string]any{"namespace": e.Name, "limit": e.Limit}}
	}),
	typed(func(e *nodeapi.SettingsLimitError) reply {
		return reply{verdict: true, code: connect.CodeResourceExhausted, status: http.StatusTooManyRequests, evCode: "SETTINGS_LIMIT",
			message: e.Describe(), evDetails: map[string]any{"namespace": e.Namespace, "limit": e.Limit, "what": e.What}}
	}),
	sentinel(fsm.ErrNamespaceNotFound, reply{verdict: true, code: connect.CodeNotFound, status: http.StatusNotFound, evCode: "NAMESPACE_NOT_FOUND",
		message: "namespace not found"}),
	sentinel(fsm.ErrNamespaceExists, reply{verdict: true, code: connect.CodeAlreadyExists, status: http.StatusConflict, evCode: "NAMESPACE_EXISTS",
		message: "namespace already exists"}),
	sentinel(fsm.ErrStreamNotFound, reply{verdict: true, code: connect.CodeNotFound, status: http.StatusNotFound, evCode: "STREAM_NOT_FOUND",
		message: "stream not found: it never had a message"}),
	sentinel(fsm.ErrStreamDeleted, reply{verdict: true, code: connect.CodeFailedPrecondition, status: http.StatusGone, evCode: "STREAM_DELETED",
		message: "the stream was hard-deleted: it accepts no more writes"}),
	typed(func(e *nodeapi.NotInFlightError) reply {
		return reply{verdict: true, code: connect.CodeFailedPrecondition, status: http.StatusConflict, evCode: "NOT_IN_FLIGHT",
			message:   fmt.Sprintf("not in flight in the group (unknown, already settled, or delivered before a leader change and due again): %s", strings.Join(e.IDs, ", ")),
			evDetails: map[string]any{"ids": e.IDs}}
	}),
	sentinel(fsm.ErrGroupNotFound, reply{verdict: true, code: connect.CodeNotFound, status: http.StatusNotFound, evCode: "GROUP_NOT_FOUND",
		message: "subscription group not found"}),
	sentinel(fsm.ErrGroupExists, reply{verdict: true, code: connect.CodeAlreadyExists, status: http.StatusConflict, evCode: "GROUP_EXISTS",
		message: "subscription group already exists"}),
	sentinel(fsm.ErrParkedNotFound, reply{verdict: true, code: connect.CodeNotFound, status: http.StatusNotFound, evCode: "PARKED_NOT_FOUND",
		message: "the group has not parked a message at that global position"}),
	sentinel(fsm.ErrIndexNotFound, reply{verdict: true, code: connect.CodeNotFound, status: http.StatusNotFound, evCode: "INDEX_NOT_FOUND",
		message: "index not found"}),
	sentinel(fsm.ErrIndexExists, reply{verdict: true, code: connect.CodeAlreadyExists, status: http.StatusConflict, evCode: "INDEX_EXISTS",
		message: "index already exists"}),
	// Not verdicts (node-local, of the index's state when read); the
	// message names the index and the state (a failure its reason).
	sentinel(fsm.ErrIndexPaused, reply{code: connect.CodeFailedPrecondition, status: http.StatusConflict, evCode: "INDEX_PAUSED", cause: true}),
	sentinel(fsm.ErrIndexFailed, reply{code: connect.CodeFailedPrecondition, status: http.StatusConflict, evCode: "INDEX_FAILED", cause: true}),
	sentinel(nodeapi.ErrUpgradeRequired, reply{code: connect.CodeFailedPrecondition, status: http.StatusServiceUnavailable, evCode: "UPGRADE_REQUIRED",
		cause: true, notApplied: true}),
	sentinel(nodeapi.ErrTransferNotDone, reply{code: connect.CodeUnavailable, status: http.StatusServiceUnavailable, evCode: "UNAVAILABLE", cause: true}),
	sentinel(nodeapi.ErrTooManyConsumers, reply{verdict: true, code: connect.CodeResourceExhausted, status: http.StatusTooManyRequests, evCode: "TOO_MANY_CONSUMERS",
		message: "the group has as many consumers as its max_consumers allows"}),
	// Not verdicts: the message is the error's own text.
	sentinel(context.DeadlineExceeded, reply{code: connect.CodeDeadlineExceeded, status: http.StatusServiceUnavailable, evCode: "UNAVAILABLE", cause: true}),
	sentinel(context.Canceled, reply{code: connect.CodeCanceled, status: http.StatusServiceUnavailable, evCode: "UNAVAILABLE", cause: true}),
	sentinel(errReplyBudget, reply{code: connect.CodeResourceExhausted, status: http.StatusServiceUnavailable,
		evCode: "SERVER_BUSY", cause: true, notApplied: true}),
	sentinel(nodeapi.ErrStorageFull, reply{code: connect.CodeResourceExhausted, status: http.StatusServiceUnavailable, evCode: "STORAGE_FULL", cause: true, notApplied: true}),
	sentinel(nodeapi.ErrUnknownOutcome, reply{code: connect.CodeUnavailable, status: http.StatusServiceUnavailable, evCode: "UNAVAILABLE", cause: true,
		message: "the write may or may not have been applied: "}),
	sentinel(nodeapi.ErrNoLeader, refusedUnavailable),
	sentinel(nodeapi.ErrNotCaughtUp, refusedUnavailable),
	sentinel(nodeapi.ErrStale, refusedUnavailable),
	sentinel(nodeapi.ErrShutdown, refusedUnavailable),
	sentinel(fsm.ErrClosed, unavailable),
}

// unavailable is a retryable condition: nothing was decided.
var unavailable = reply{code: connect.CodeUnavailable, status: http.StatusServiceUnavailable, evCode: "UNAVAILABLE", cause: true}

// refusedUnavailable is unavailable, refused before anything was
// proposed: no leader within the wait, a read not caught up or too
// stale, the node shutting down before it proposed.
var refusedUnavailable = reply{code: connect.CodeUnavailable, status: http.StatusServiceUnavailable, evCode: "UNAVAILABLE", cause: true, notApplied: true}

// typed is the row of an error type, matched with errors.As.
func typed[E error](build func(E) reply) func(error) (reply, bool) {
	return func(err error) (reply, bool) {
		var e E
		if errors.As(err, &e) {
			return build(e), true
		}
		return reply{}, false
	}
}

// sentinel is the row of a sentinel error, matched with errors.Is.
func sentinel(target error, r reply) func(error) (reply, bool) {
	return func(err error) (reply, bool) { return r, errors.Is(err, target) }
}

// lookupError returns the table's reply to err; known is false (and the
// reply internalReply) for an error it does not list.
func lookupError(err error) (r reply, known bool) {
	for _, row := range errorTable {
		if r, ok := row(err); ok {
			return r, true
		}
	}
	return internalReply, false
}

// invalidReply is InvalidArgument (400 INVALID_REQUEST) for one field,
// with a google.rpc.BadRequest field violation on Connect.
func invalidReply(field, desc string) reply {
	return reply{verdict: true, code: connect.CodeInvalidArgument, status: http.StatusBadRequest, evCode: "INVALID_REQUEST",
		message: field + ": " + desc,
		details: []proto.Message{&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: desc}}}}}
}

// connectError is r in Connect's shape; cause is the error answered.
func (r reply) connectError(cause error) *connect.Error {
	var e *connect.Error
	switch {
	case !r.cause:
		e = connect.NewError(r.code, errors.New(r.message))
	case r.message == "":
		e = connect.NewError(r.code, cause)
	default:
		e = connect.NewError(r.code, fmt.Errorf("%s%w", r.message, cause))
	}
	for _, d := range r.details {
		if ed, err := connect.NewErrorDetail(d); err == nil {
			e.AddDetail(ed)
		}
	}
	if r.notApplied {
		e.Meta().Set(OutcomeHeader, OutcomeNotApplied)
	}
	return e
}

// evdbError is r in EventoDB's shape; cause is the error answered.
func (r reply) evdbError(cause error) *evdb.Error {
	msg := r.message
	switch {
	case r.cause:
		msg += cause.Error()
	case r.evMessage != "":
		msg = r.evMessage
	}
	return &evdb.Error{Status: r.status, Code: r.evCode, Message: msg, Details: r.evDetails, NotApplied: r.notApplied}
}

// namespaceGoneError replaces fsm.ErrNamespaceNotFound in a call on the
// caller's own namespace: the token's namespace was deleted after a node
// admitted the token (it can, before it applies the delete).
type namespaceGoneError struct{ namespace string }

func (e *namespaceGoneError) Error() string {
	return fmt.Sprintf("the token's namespace %q no longer exists", e.namespace)
}

// namespaceNotFoundError replaces fsm.ErrNamespaceNotFound in a call that
// names the namespace (Namespaces, EventoDB's ns.*).
type namespaceNotFoundError struct{ name string }

func (e *namespaceNotFoundError) Error() string { return fmt.Sprintf("namespace %q not found", e.name) }

// ownNamespace is err of a call on the caller's own namespace (EventStore,
// EventoDB's data methods), where a missing namespace means its token's
// namespace was deleted: Unauthenticated, 403 AUTH_UNAUTHORIZED.
func ownNamespace(ctx context.Context, err error) error {
	if errors.Is(err, fsm.ErrNamespaceNotFound) {
		return &namespaceGoneError{namespace: callerFrom(ctx).namespace}
	}
	return err
}

// namedNamespace is err of a call on the namespace name: a missing
// namespace is NotFound, 404 NAMESPACE_NOT_FOUND naming it.
func namedNamespace(name string, err error) error {
	if errors.Is(err, fsm.ErrNamespaceNotFound) {
		return &namespaceNotFoundError{name: name}
	}
	return err
}

// toConnect answers err from the node or the state machine on Connect
// through errorTable. A *connect.Error passes through; once the call's
// deadline has passed, anything but a verdict is DeadlineExceeded; an
// unknown error is Internal with a generic message (the real one is
// logged, never sent).
func toConnect(ctx context.Context, log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	r, known := lookupError(err)
	if !r.verdict && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		e := connect.NewError(connect.CodeDeadlineExceeded, err)
		if r.notApplied {
			e.Meta().Set(OutcomeHeader, OutcomeNotApplied)
		}
		return e
	}
	if !known {
		log.Error("internal error", "err", err)
	}
	return r.connectError(err)
}

// backendError answers err from the node or the state machine through
// errorTable, in EventoDB's shape. Data calls act on the token's
// namespace, so a missing namespace means it was deleted: 403. An unknown
// error is 500 BACKEND_ERROR (logged, never sent).
func (e *eventodb) backendError(ctx context.Context, err error) *evdb.Error {
	err = ownNamespace(ctx, err)
	r, known := lookupError(err)
	if !known {
		e.log.Error("eventodb api: backend error", "err", err)
	}
	return r.evdbError(err)
}

// invalidField is InvalidArgument with a google.rpc.BadRequest field
// violation.
func invalidField(field, format string, args ...any) *connect.Error {
	return invalidReply(field, fmt.Sprintf(format, args...)).connectError(nil)
}

// ConnectError is the error the API returns for err from the node or the
// state machine: what clients (the chaos harness among them) classify.
func ConnectError(err error) error {
	return toConnect(context.Background(), slog.New(slog.DiscardHandler), err)
}
