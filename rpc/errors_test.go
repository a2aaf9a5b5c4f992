package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/rpc/evdb"
)

// failingBackend answers every call the tests make with err.
type failingBackend struct {
	Backend
	err error
}

func (f failingBackend) Append(context.Context, *fsmv1.Append) (*fsmv1.Result, error) {
	return nil, f.err
}

func (f failingBackend) DeleteNamespace(context.Context, *fsmv1.DeleteNamespace) (*fsmv1.Result, error) {
	return nil, f.err
}

func (f failingBackend) Read(context.Context, string, nodeapi.ReadOptions, func(*fsm.View) error) (uint64, error) {
	return 0, f.err
}

// connectReply is what a Connect client sees of an error.
type connectReply struct {
	code    connect.Code
	message string
	details []proto.Message
	outcome string // the OutcomeHeader metadata
}

func connectReplyOf(t *testing.T, err error) connectReply {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v (%T) is not a *connect.Error", err, err)
	}
	r := connectReply{code: ce.Code(), message: ce.Message(), outcome: ce.Meta().Get(OutcomeHeader)}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			t.Fatalf("detail %s: %v", d.Type(), derr)
		}
		r.details = append(r.details, v)
	}
	return r
}

func (r connectReply) equal(o connectReply) bool {
	if r.code != o.code || r.message != o.message || r.outcome != o.outcome || len(r.details) != len(o.details) {
		return false
	}
	for i := range r.details {
		if !proto.Equal(r.details[i], o.details[i]) {
			return false
		}
	}
	return true
}

func (r connectReply) String() string {
	return fmt.Sprintf("%v %q %v outcome=%q", r.code, r.message, r.details, r.outcome)
}

// The error table: for every node and state-machine error, the reply of
// both APIs, in a call on the caller's own namespace (EventStore.Append,
// stream.write) and in one naming a namespace (Namespaces.Delete,
// ns.delete; Namespaces.Get, ns.info). Written against the two maps
// before they became one table, so it pins that the table changed no
// reply.
func TestErrorTable(t *testing.T) {
	t.Parallel()
	dupContent := &fsm.DuplicateIDError{Message: 2, ID: "0b5f6a9e-1111-4c4c-8888-000000000001", Stream: "account-1",
		Position: 3, GlobalPosition: 42, Reason: fsm.DuplicateContent}
	dupMixed := &fsm.DuplicateIDError{Message: 0, Field: "streams[1].messages[0]", ID: "0b5f6a9e-1111-4c4c-8888-000000000002",
		Stream: "account-2", Position: 0, GlobalPosition: 7, Reason: fsm.DuplicateMixed}
	conflicts := &fsm.VersionConflictsError{Conflicts: []fsm.VersionConflictError{
		{Stream: "a-1", Expected: 7, Actual: 1}, {Stream: "b-2", Expected: -1, Actual: 0}}}
	storageFull := fmt.Errorf("%w: server s2 has 12 MiB free, needs 64 MiB", nodeapi.ErrStorageFull)
	unknownOutcome := fmt.Errorf("%w: forwarded write: context canceled", nodeapi.ErrUnknownOutcome)
	upgrade := fmt.Errorf("%w: a server of the cluster does not report state machine version 2", nodeapi.ErrUpgradeRequired)
	paused := fmt.Errorf("%w: index %q does not hold every event the read must see; resume it, or read at LOCAL", fsm.ErrIndexPaused, "ix")
	failed := fmt.Errorf("%w: index %q: its checkpoint (XC) does not decode (rebuild it)", fsm.ErrIndexFailed, "ix")
	// Refused before anything was proposed: both surfaces say so.
	notApplied := func(err error) (connectReply, *evdb.Error) {
		return connectReply{code: connect.CodeUnavailable, message: err.Error(), outcome: OutcomeNotApplied},
			&evdb.Error{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: err.Error(), NotApplied: true}
	}
	unavailable := func(err error) (connectReply, *evdb.Error) {
		return connectReply{code: connect.CodeUnavailable, message: err.Error()},
			&evdb.Error{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: err.Error()}
	}
	internal := func() (connectReply, *evdb.Error) {
		return connectReply{code: connect.CodeInternal, message: "internal error"},
			&evdb.Error{Status: http.StatusInternalServerError, Code: "BACKEND_ERROR", Message: "storage error"}
	}
	type want struct {
		connect connectReply
		evdb    *evdb.Error
	}
	cases := []struct {
		name  string
		err   error
		own   want  // EventStore.Append and stream.write
		named *want // Namespaces.Delete/Get and ns.delete/info, when it differs from own
	}{
		{name: "duplicate_id_content", err: dupContent, own: want{
			connectReply{code: connect.CodeAlreadyExists,
				message: `messages[2].id 0b5f6a9e-1111-4c4c-8888-000000000001 was already written to stream "account-1" at position 3 (global position 42) with a different stream, type or data`,
				details: []proto.Message{&skaldv1.DuplicateMessageId{Message: 2, Id: dupContent.ID, Stream: "account-1", Position: 3, GlobalPosition: 42, Reason: "content"}}},
			&evdb.Error{Status: http.StatusConflict, Code: "DUPLICATE_MESSAGE_ID",
				Message: `messages[2].id 0b5f6a9e-1111-4c4c-8888-000000000001 was already written to stream "account-1" at position 3 (global position 42) with a different stream, type or data`,
				Details: map[string]any{"id": dupContent.ID, "stream": "account-1", "position": int64(3), "globalPosition": int64(42), "reason": "content"}}}},
		{name: "duplicate_id_mixed", err: dupMixed, own: want{
			connectReply{code: connect.CodeAlreadyExists,
				message: `streams[1].messages[0].id 0b5f6a9e-1111-4c4c-8888-000000000002 was already written to stream "account-2" at position 0 (global position 7) but the append is not that write again: a retry must resend the original append, and new messages need new ids`,
				details: []proto.Message{&skaldv1.DuplicateMessageId{Message: 0, Field: "streams[1].messages[0]", Id: dupMixed.ID, Stream: "account-2", Position: 0, GlobalPosition: 7, Reason: "mixed"}}},
			&evdb.Error{Status: http.StatusConflict, Code: "DUPLICATE_MESSAGE_ID",
				Message: `streams[1].messages[0].id 0b5f6a9e-1111-4c4c-8888-000000000002 was already written to stream "account-2" at position 0 (global position 7) but the append is not that write again: a retry must resend the original append, and new messages need new ids`,
				Details: map[string]any{"id": dupMixed.ID, "stream": "account-2", "position": int64(0), "globalPosition": int64(7), "reason": "mixed"}}}},
		{name: "validation", err: &fsm.ValidationError{Field: "messages[0].data", Reason: "must be a JSON object"}, own: want{
			connectReply{code: connect.CodeInvalidArgument, message: "messages[0].data: must be a JSON object",
				details: []proto.Message{&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "messages[0].data", Description: "must be a JSON object"}}}}},
			&evdb.Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST", Message: "messages[0].data: must be a JSON object"}}},
		{name: "version_conflict", err: &fsm.VersionConflictError{Stream: "account-1", Expected: 4, Actual: -1}, own: want{
			connectReply{code: connect.CodeAborted, message: `stream "account-1" is at version -1, expected 4`,
				details: []proto.Message{&skaldv1.VersionConflict{Stream: "account-1", ExpectedVersion: 4, ActualVersion: -1}}},
			&evdb.Error{Status: http.StatusConflict, Code: "STREAM_VERSION_CONFLICT", Message: "Expected version 4, stream is at version -1",
				Details: map[string]any{"expected": int64(4), "actual": int64(-1)}}}},
		{name: "version_conflicts", err: conflicts, own: want{
			connectReply{code: connect.CodeAborted, message: `expected versions do not match: stream "a-1" is at version 1, expected 7; stream "b-2" is at version 0, expected -1`,
				details: []proto.Message{&skaldv1.VersionConflicts{Conflicts: []*skaldv1.VersionConflict{
					{Stream: "a-1", ExpectedVersion: 7, ActualVersion: 1}, {Stream: "b-2", ExpectedVersion: -1, ActualVersion: 0}}}}},
			// Unmapped (500) on EventoDB before the table; unreachable there
			// (no multi-stream write), now a conflict like stream.write's.
			&evdb.Error{Status: http.StatusConflict, Code: "STREAM_VERSION_CONFLICT",
				Message: `expected versions do not match: stream "a-1" is at version 1, expected 7; stream "b-2" is at version 0, expected -1`,
				Details: map[string]any{"conflicts": []map[string]any{{"stream": "a-1", "expected": int64(7), "actual": int64(1)}, {"stream": "b-2", "expected": int64(-1), "actual": int64(0)}}}}}},
		{name: "condition_failed", err: &fsm.ConditionFailedError{After: 7, GlobalPosition: 9}, own: want{
			connectReply{code: connect.CodeFailedPrecondition, message: "append condition failed: message at global position 9 matches the query and is after 7",
				details: []proto.Message{&skaldv1.ConditionFailed{GlobalPosition: 9, After: 7}}},
			// Unreachable on EventoDB (no conditional write), a conflict there.
			&evdb.Error{Status: http.StatusConflict, Code: "CONDITION_FAILED", Message: "append condition failed: message at global position 9 matches the query and is after 7",
				Details: map[string]any{"globalPosition": int64(9), "after": int64(7)}}}},
		{name: "namespace_not_found", err: fmt.Errorf("read: %w", fsm.ErrNamespaceNotFound),
			own: want{connectReply{code: connect.CodeUnauthenticated, message: "the token's namespace no longer exists"},
				&evdb.Error{Status: http.StatusForbidden, Code: "AUTH_UNAUTHORIZED", Message: "the token's namespace no longer exists",
					Details: map[string]any{"namespace": nstoken.AdminNamespace}}},
			named: &want{connectReply{code: connect.CodeNotFound, message: "namespace not found"},
				&evdb.Error{Status: http.StatusNotFound, Code: "NAMESPACE_NOT_FOUND", Message: `namespace "shop" not found`}}},
		{name: "namespace_exists", err: fsm.ErrNamespaceExists, own: want{
			connectReply{code: connect.CodeAlreadyExists, message: "namespace already exists"},
			&evdb.Error{Status: http.StatusConflict, Code: "NAMESPACE_EXISTS", Message: "namespace already exists"}}},
		{name: "namespace_limit", err: &fsm.NamespaceLimitError{Name: "tenant-301", Limit: 300}, own: want{
			connectReply{code: connect.CodeResourceExhausted,
				message: `namespace "tenant-301" not created: 300 namespaces exist, the most the cluster allows (--max-namespaces); delete one or raise the limit`},
			&evdb.Error{Status: http.StatusTooManyRequests, Code: "NAMESPACE_LIMIT",
				Message: `namespace "tenant-301" not created: 300 namespaces exist, the most the cluster allows (--max-namespaces); delete one or raise the limit`,
				Details: map[string]any{"namespace": "tenant-301", "limit": int64(300)}}}},
		{name: "settings_limit", err: &nodeapi.SettingsLimitError{Namespace: "shop", What: "credentials", Limit: 1000}, own: want{
			connectReply{code: connect.CodeResourceExhausted,
				message: `namespace "shop" holds 1000 credentials, the most the cluster allows (--max-credentials-per-namespace); delete one or raise the limit`},
			&evdb.Error{Status: http.StatusTooManyRequests, Code: "SETTINGS_LIMIT",
				Message: `namespace "shop" holds 1000 credentials, the most the cluster allows (--max-credentials-per-namespace); delete one or raise the limit`,
				Details: map[string]any{"namespace": "shop", "limit": int64(1000), "what": "credentials"}}}},
		{name: "stream_not_found", err: fsm.ErrStreamNotFound, own: want{
			connectReply{code: connect.CodeNotFound, message: "stream not found: it never had a message"},
			&evdb.Error{Status: http.StatusNotFound, Code: "STREAM_NOT_FOUND", Message: "stream not found: it never had a message"}}},
		{name: "stream_deleted", err: fsm.ErrStreamDeleted, own: want{
			connectReply{code: connect.CodeFailedPrecondition, message: "the stream was hard-deleted: it accepts no more writes"},
			&evdb.Error{Status: http.StatusGone, Code: "STREAM_DELETED", Message: "the stream was hard-deleted: it accepts no more writes"}}},
		{name: "group_not_found", err: fmt.Errorf("%w: %q", fsm.ErrGroupNotFound, "g"), own: want{
			connectReply{code: connect.CodeNotFound, message: "subscription group not found"},
			&evdb.Error{Status: http.StatusNotFound, Code: "GROUP_NOT_FOUND", Message: "subscription group not found"}}},
		{name: "group_exists", err: fsm.ErrGroupExists, own: want{
			connectReply{code: connect.CodeAlreadyExists, message: "subscription group already exists"},
			&evdb.Error{Status: http.StatusConflict, Code: "GROUP_EXISTS", Message: "subscription group already exists"}}},
		{name: "parked_not_found", err: fsm.ErrParkedNotFound, own: want{
			connectReply{code: connect.CodeNotFound, message: "the group has not parked a message at that global position"},
			&evdb.Error{Status: http.StatusNotFound, Code: "PARKED_NOT_FOUND", Message: "the group has not parked a message at that global position"}}},
		{name: "not_in_flight", err: &nodeapi.NotInFlightError{IDs: []string{"a", "b"}}, own: want{
			connectReply{code: connect.CodeFailedPrecondition, message: "not in flight in the group (unknown, already settled, or delivered before a leader change and due again): a, b"},
			&evdb.Error{Status: http.StatusConflict, Code: "NOT_IN_FLIGHT", Message: "not in flight in the group (unknown, already settled, or delivered before a leader change and due again): a, b",
				Details: map[string]any{"ids": []string{"a", "b"}}}}},
		{name: "index_not_found", err: fmt.Errorf("%w: %q", fsm.ErrIndexNotFound, "ix"), own: want{
			connectReply{code: connect.CodeNotFound, message: "index not found"},
			&evdb.Error{Status: http.StatusNotFound, Code: "INDEX_NOT_FOUND", Message: "index not found"}}},
		{name: "index_exists", err: fsm.ErrIndexExists, own: want{
			connectReply{code: connect.CodeAlreadyExists, message: "index already exists"},
			&evdb.Error{Status: http.StatusConflict, Code: "INDEX_EXISTS", Message: "index already exists"}}},
		{name: "index_paused", err: paused, own: want{
			connectReply{code: connect.CodeFailedPrecondition, message: paused.Error()},
			&evdb.Error{Status: http.StatusConflict, Code: "INDEX_PAUSED", Message: paused.Error()}}},
		{name: "index_failed", err: failed, own: want{
			connectReply{code: connect.CodeFailedPrecondition, message: failed.Error()},
			&evdb.Error{Status: http.StatusConflict, Code: "INDEX_FAILED", Message: failed.Error()}}},
		{name: "upgrade_required", err: upgrade, own: want{
			connectReply{code: connect.CodeFailedPrecondition, message: upgrade.Error(), outcome: OutcomeNotApplied},
			&evdb.Error{Status: http.StatusServiceUnavailable, Code: "UPGRADE_REQUIRED", Message: upgrade.Error(), NotApplied: true}}},
		{name: "too_many_consumers", err: nodeapi.ErrTooManyConsumers, own: want{
			connectReply{code: connect.CodeResourceExhausted, message: "the group has as many consumers as its max_consumers allows"},
			&evdb.Error{Status: http.StatusTooManyRequests, Code: "TOO_MANY_CONSUMERS", Message: "the group has as many consumers as its max_consumers allows"}}},
		{name: "deadline", err: context.DeadlineExceeded, own: want{
			connectReply{code: connect.CodeDeadlineExceeded, message: "context deadline exceeded"},
			&evdb.Error{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: "context deadline exceeded"}}},
		{name: "canceled", err: context.Canceled, own: want{
			connectReply{code: connect.CodeCanceled, message: "context canceled"},
			&evdb.Error{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: "context canceled"}}},
		{name: "storage_full", err: storageFull, own: want{
			connectReply{code: connect.CodeResourceExhausted, message: storageFull.Error(), outcome: OutcomeNotApplied},
			&evdb.Error{Status: http.StatusServiceUnavailable, Code: "STORAGE_FULL", Message: storageFull.Error(), NotApplied: true}}},
		{name: "unknown_outcome", err: unknownOutcome, own: want{
			connectReply{code: connect.CodeUnavailable, message: "the write may or may not have been applied: " + unknownOutcome.Error()},
			&evdb.Error{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: "the write may or may not have been applied: " + unknownOutcome.Error()}}},
		{name: "no_leader", err: nodeapi.ErrNoLeader},
		{name: "not_caught_up", err: fmt.Errorf("%w: index 9 not applied (at 7): context deadline exceeded", nodeapi.ErrNotCaughtUp)},
		// 500 BACKEND_ERROR on EventoDB before the table (unreachable: its
		// reads are linearizable); retryable, so 503 there too now.
		{name: "stale", err: fmt.Errorf("%w: leader last heard 3s ago, bound 1s", nodeapi.ErrStale)},
		{name: "shutdown", err: nodeapi.ErrShutdown},
		{name: "transfer_not_done", err: fmt.Errorf("%w: leadership transfer timeout; the leader is unchanged, try again", nodeapi.ErrTransferNotDone)},
		{name: "store_closed", err: fsm.ErrClosed},
		{name: "position_exists", err: &fsm.PositionExistsError{Record: 1, Stream: "a-1", Reason: "taken"}},
		{name: "bad_command", err: fsm.ErrBadCommand},
		{name: "unknown", err: errors.New("disk on fire")},
	}
	for i := range cases {
		c := &cases[i]
		if c.own.evdb != nil {
			continue
		}
		switch c.name {
		case "position_exists", "bad_command", "unknown":
			c.own.connect, c.own.evdb = internal()
		case "no_leader", "not_caught_up", "stale", "shutdown":
			c.own.connect, c.own.evdb = notApplied(c.err)
		default:
			c.own.connect, c.own.evdb = unavailable(c.err)
		}
	}
	log := slog.New(slog.DiscardHandler)
	ctx := context.WithValue(context.Background(), callerKey{}, caller{namespace: nstoken.AdminNamespace, admin: true})
	appendReq := connect.NewRequest(&skaldv1.AppendRequest{Stream: "account-1", Messages: []*skaldv1.NewMessage{{Type: "Opened", Data: []byte(`{}`)}}})
	writeArgs := evdb.Args{json.RawMessage(`"account-1"`), json.RawMessage(`{"type":"Opened","data":{}}`)}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := failingBackend{err: c.err}
			ev := &eventodb{b: b, log: log}
			named := c.own
			if c.named != nil {
				named = *c.named
			}
			_, err := (&eventStore{b: b, log: log}).Append(ctx, appendReq)
			if got := connectReplyOf(t, err); !got.equal(c.own.connect) {
				t.Errorf("EventStore.Append: got %v, want %v", got, c.own.connect)
			}
			_, err = (&namespaces{b: b, log: log}).Delete(ctx, connect.NewRequest(&skaldv1.DeleteRequest{Name: "shop"}))
			if got := connectReplyOf(t, err); !got.equal(named.connect) {
				t.Errorf("Namespaces.Delete: got %v, want %v", got, named.connect)
			}
			_, err = (&namespaces{b: b, log: log}).Get(ctx, connect.NewRequest(&skaldv1.GetRequest{Name: "shop"}))
			if got := connectReplyOf(t, err); !got.equal(named.connect) {
				t.Errorf("Namespaces.Get: got %v, want %v", got, named.connect)
			}
			if _, got := ev.streamWrite(ctx, writeArgs); !reflect.DeepEqual(got, c.own.evdb) {
				t.Errorf("stream.write: got %#v, want %#v", got, c.own.evdb)
			}
			if _, got := ev.nsDelete(ctx, evdb.Args{json.RawMessage(`"shop"`)}); !reflect.DeepEqual(got, named.evdb) {
				t.Errorf("ns.delete: got %#v, want %#v", got, named.evdb)
			}
			if _, got := ev.nsInfo(ctx, evdb.Args{json.RawMessage(`"shop"`)}); !reflect.DeepEqual(got, named.evdb) {
				t.Errorf("ns.info: got %#v, want %#v", got, named.evdb)
			}
		})
	}
}

// Connect answers DeadlineExceeded once the call's deadline has passed,
// whatever the node said, except for the state machine's verdicts;
// EventoDB keeps the node's answer.
func TestErrorTableDeadlinePassed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	ctx = context.WithValue(ctx, callerKey{}, caller{namespace: nstoken.AdminNamespace, admin: true})
	log := slog.New(slog.DiscardHandler)
	cases := []struct {
		err     error
		connect connectReply
		evdb    *evdb.Error
	}{
		{nodeapi.ErrNoLeader, connectReply{code: connect.CodeDeadlineExceeded, message: "node: no leader", outcome: OutcomeNotApplied},
			&evdb.Error{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: "node: no leader", NotApplied: true}},
		{nodeapi.ErrStorageFull, connectReply{code: connect.CodeDeadlineExceeded, message: "node: storage full", outcome: OutcomeNotApplied},
			&evdb.Error{Status: http.StatusServiceUnavailable, Code: "STORAGE_FULL", Message: "node: storage full", NotApplied: true}},
		{nodeapi.ErrUnknownOutcome, connectReply{code: connect.CodeDeadlineExceeded, message: "node: write outcome unknown"},
			&evdb.Error{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: "the write may or may not have been applied: node: write outcome unknown"}},
		{errors.New("disk on fire"), connectReply{code: connect.CodeDeadlineExceeded, message: "disk on fire"},
			&evdb.Error{Status: http.StatusInternalServerError, Code: "BACKEND_ERROR", Message: "storage error"}},
		{fsm.ErrStreamDeleted, connectReply{code: connect.CodeFailedPrecondition, message: "the stream was hard-deleted: it accepts no more writes"},
			&evdb.Error{Status: http.StatusGone, Code: "STREAM_DELETED", Message: "the stream was hard-deleted: it accepts no more writes"}},
		{&fsm.VersionConflictError{Stream: "a-1", Expected: 1, Actual: 2}, connectReply{code: connect.CodeAborted, message: `stream "a-1" is at version 2, expected 1`,
			details: []proto.Message{&skaldv1.VersionConflict{Stream: "a-1", ExpectedVersion: 1, ActualVersion: 2}}},
			&evdb.Error{Status: http.StatusConflict, Code: "STREAM_VERSION_CONFLICT", Message: "Expected version 1, stream is at version 2",
				Details: map[string]any{"expected": int64(1), "actual": int64(2)}}},
	}
	for _, c := range cases {
		if got := connectReplyOf(t, toConnect(ctx, log, c.err)); !got.equal(c.connect) {
			t.Errorf("%v: Connect got %v, want %v", c.err, got, c.connect)
		}
		if got := (&eventodb{log: log}).backendError(ctx, c.err); !reflect.DeepEqual(got, c.evdb) {
			t.Errorf("%v: EventoDB got %#v, want %#v", c.err, got, c.evdb)
		}
	}
}

// A *connect.Error passes through toConnect unchanged.
func TestToConnectPassesConnectErrors(t *testing.T) {
	t.Parallel()
	in := connect.NewError(connect.CodePermissionDenied, errors.New("not yours"))
	if got := toConnect(context.Background(), slog.New(slog.DiscardHandler), fmt.Errorf("wrapped: %w", in)); got != in {
		t.Fatalf("got %v, want %v", got, in)
	}
}

// A watermark that fsm refuses is the same InvalidArgument on both APIs.
func TestWatermarkRefusal(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	ctx := context.WithValue(context.Background(), callerKey{}, caller{namespace: nstoken.AdminNamespace, admin: true})
	_, err := (&eventStore{log: log}).DeleteByWatermark(ctx, connect.NewRequest(&skaldv1.DeleteByWatermarkRequest{
		Category: "account", Watermarks: map[string]int64{"order-1": 3}}))
	got := connectReplyOf(t, err)
	if got.code != connect.CodeInvalidArgument || got.message != `watermarks[0].stream: "order-1" is not in category "account"` || len(got.details) != 1 {
		t.Fatalf("DeleteByWatermark: got %v", got)
	}
	_, everr := (&eventodb{log: log}).categoryDeleteByWatermark(ctx, evdb.Args{json.RawMessage(`"account"`), json.RawMessage(`{"watermarks":{"order-1":3}}`)})
	want := &evdb.Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST", Message: got.message}
	if !reflect.DeepEqual(everr, want) {
		t.Fatalf("category.deleteByWatermark: got %#v, want %#v", everr, want)
	}
}

// A token given to create a namespace must be a well-formed token of that
// namespace; both APIs say so in their own words.
func TestCreateNamespaceBadToken(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	ctx := context.WithValue(context.Background(), callerKey{}, caller{namespace: nstoken.AdminNamespace, admin: true})
	other, err := nstoken.New("other")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, token string
		connect     connectReply
		evdb        *evdb.Error
	}{
		{"malformed", "nope", connectReply{code: connect.CodeInvalidArgument, message: `token: token must start with "ns_"`,
			details: []proto.Message{&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "token", Description: `token must start with "ns_"`}}}}},
			&evdb.Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST", Message: `option token: token must start with "ns_"`}},
		{"other_namespace", other, connectReply{code: connect.CodeInvalidArgument, message: `token: names namespace "other", not "shop"`,
			details: []proto.Message{&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "token", Description: `names namespace "other", not "shop"`}}}}},
			&evdb.Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST", Message: `option token names namespace "other", not "shop"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := (&namespaces{log: log}).Create(ctx, connect.NewRequest(&skaldv1.CreateRequest{Name: "shop", Token: c.token}))
			if got := connectReplyOf(t, err); !got.equal(c.connect) {
				t.Errorf("Namespaces.Create: got %v, want %v", got, c.connect)
			}
			opts, _ := json.Marshal(map[string]string{"token": c.token})
			if _, got := (&eventodb{log: log}).nsCreate(ctx, evdb.Args{json.RawMessage(`"shop"`), opts}); !reflect.DeepEqual(got, c.evdb) {
				t.Errorf("ns.create: got %#v, want %#v", got, c.evdb)
			}
		})
	}
}
