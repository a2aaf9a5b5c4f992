package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
	peerv1 "github.com/skalddb/skald/node/peerv1"
	"github.com/skalddb/skald/node/peerv1/peerv1connect"
)

// outcomeKey is the error metadata key by which a peer says a failed call
// changed nothing ("not-applied"), so the caller may retry it elsewhere.
const outcomeKey = "Skald-Outcome"

// errNotSent is a forwarding failure that certainly did not reach the
// leader (the connection was refused).
var errNotSent = errors.New("node: forward not sent")

type peerServer struct{ n *Node }

// newPeerHandler is the peer service. It is served on the cluster port
// only, where mutual TLS has already proven the caller a member.
func newPeerHandler(n *Node) (string, http.Handler) {
	// Replies are small: gzip (which connect-go applies to every reply a
	// client accepts it for) cost the leader an eighth of its CPU.
	return peerv1connect.NewPeerServiceHandler(&peerServer{n}, connect.WithCompressMinBytes(1024))
}

func notApplied(code connect.Code, err error) *connect.Error {
	ce := connect.NewError(code, err)
	ce.Meta().Set(outcomeKey, "not-applied")
	return ce
}

func (p *peerServer) Apply(ctx context.Context, req *connect.Request[peerv1.ApplyRequest]) (*connect.Response[peerv1.ApplyResponse], error) {
	if req.Msg.Command == nil {
		return nil, notApplied(connect.CodeInvalidArgument, errors.New("command is required"))
	}
	// Only the local leader path: a peer never forwards again (no loops).
	res, err := p.n.applyLocal(p.n.peerParent(ctx, req.Header()), req.Msg.Command)
	switch {
	case errors.Is(err, errNotLeader):
		return nil, notApplied(connect.CodeFailedPrecondition, err)
	case errors.Is(err, nodeapi.ErrNoLeader):
		return nil, notApplied(connect.CodeUnavailable, err)
	case errors.Is(err, nodeapi.ErrStorageFull):
		return nil, notApplied(connect.CodeResourceExhausted, err)
	case errors.Is(err, nodeapi.ErrUnknownOutcome):
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	resp, cerr := encodeResult(res, err)
	if cerr != nil {
		return nil, connect.NewError(connect.CodeInternal, cerr)
	}
	return connect.NewResponse(resp), nil
}

// maxForwardBatch bounds the commands of one ApplyBatch call.
const maxForwardBatch = 256

func (p *peerServer) ApplyBatch(ctx context.Context, req *connect.Request[peerv1.ApplyBatchRequest]) (*connect.Response[peerv1.ApplyBatchResponse], error) {
	cmds := req.Msg.Commands
	if len(cmds) == 0 || len(cmds) > maxForwardBatch {
		return nil, notApplied(connect.CodeInvalidArgument, fmt.Errorf("a batch holds 1 to %d commands, got %d", maxForwardBatch, len(cmds)))
	}
	for i, c := range cmds {
		if c == nil || c.Kind == nil {
			return nil, notApplied(connect.CodeInvalidArgument, fmt.Errorf("command %d is empty", i))
		}
	}
	// Proposed concurrently, so Raft batches them into as few log writes
	// as it can (BatchApplyCh); each is still its own entry.
	out := make([]*peerv1.ApplyOutcome, len(cmds))
	parents := p.n.peerParents(ctx, req.Header(), len(cmds)) // nil: untraced
	var wg sync.WaitGroup
	for i, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := ctx
			if parents != nil {
				ctx = parents[i]
			}
			out[i] = outcomeOf(p.n.applyLocal(ctx, c))
		}()
	}
	wg.Wait()
	return connect.NewResponse(&peerv1.ApplyBatchResponse{Outcomes: out}), nil
}

// outcomeOf is what Apply answers for one command, as a batch outcome.
func outcomeOf(res any, err error) *peerv1.ApplyOutcome {
	fail := func(kind peerv1.FailureKind, err error) *peerv1.ApplyOutcome {
		return &peerv1.ApplyOutcome{Outcome: &peerv1.ApplyOutcome_Failure{Failure: &peerv1.ApplyFailure{Kind: kind, Message: err.Error()}}}
	}
	switch {
	case errors.Is(err, errNotLeader):
		return fail(peerv1.FailureKind_FAILURE_KIND_NOT_LEADER, err)
	case errors.Is(err, nodeapi.ErrNoLeader):
		return fail(peerv1.FailureKind_FAILURE_KIND_NO_LEADER, err)
	case errors.Is(err, nodeapi.ErrStorageFull):
		return fail(peerv1.FailureKind_FAILURE_KIND_STORAGE_FULL, err)
	case errors.Is(err, nodeapi.ErrUnknownOutcome):
		return fail(peerv1.FailureKind_FAILURE_KIND_UNKNOWN, err)
	}
	resp, cerr := encodeResult(res, err)
	if cerr != nil {
		return fail(peerv1.FailureKind_FAILURE_KIND_UNKNOWN, cerr)
	}
	return &peerv1.ApplyOutcome{Outcome: &peerv1.ApplyOutcome_Response{Response: resp}}
}

// storageFull rebuilds the leader's nodeapi.ErrStorageFull from its message.
func storageFull(msg string) error {
	return fmt.Errorf("%w: %s", nodeapi.ErrStorageFull, strings.TrimPrefix(msg, nodeapi.ErrStorageFull.Error()+": "))
}

// resultOf is the inverse of outcomeOf.
func resultOf(o *peerv1.ApplyOutcome) (any, error) {
	switch r := o.GetOutcome().(type) {
	case *peerv1.ApplyOutcome_Response:
		return decodeResult(r.Response)
	case *peerv1.ApplyOutcome_Failure:
		switch r.Failure.Kind {
		case peerv1.FailureKind_FAILURE_KIND_NOT_LEADER:
			return nil, errNotLeader
		case peerv1.FailureKind_FAILURE_KIND_NO_LEADER:
			return nil, fmt.Errorf("%w: forwarded write: %s", nodeapi.ErrNoLeader, r.Failure.Message)
		case peerv1.FailureKind_FAILURE_KIND_STORAGE_FULL:
			return nil, storageFull(r.Failure.Message)
		}
		return nil, fmt.Errorf("%w: forwarded write: %s", nodeapi.ErrUnknownOutcome, r.Failure.Message)
	}
	return nil, fmt.Errorf("%w: peer sent an empty outcome", nodeapi.ErrUnknownOutcome)
}

func (p *peerServer) ReadIndex(ctx context.Context, _ *connect.Request[peerv1.ReadIndexRequest]) (*connect.Response[peerv1.ReadIndexResponse], error) {
	idx, err := p.n.leaderIndex.get(ctx)
	if errors.Is(err, errNotLeader) {
		return nil, notApplied(connect.CodeFailedPrecondition, err)
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	return connect.NewResponse(&peerv1.ReadIndexResponse{Index: idx}), nil
}

// peerClients holds one Connect client per member's cluster port
// address (its Raft address).
type peerClients struct {
	http   *http.Client
	mu     sync.Mutex
	byAddr map[string]peerv1connect.PeerServiceClient
}

func newPeerClients(tr http.RoundTripper) *peerClients {
	return &peerClients{http: &http.Client{Transport: tr}, byAddr: make(map[string]peerv1connect.PeerServiceClient)}
}

func (c *peerClients) client(addr string) peerv1connect.PeerServiceClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.byAddr[addr]
	if !ok {
		cl = peerv1connect.NewPeerServiceClient(c.http, "https://"+addr)
		c.byAddr[addr] = cl
	}
	return cl
}

func (c *peerClients) close() { c.http.CloseIdleConnections() }

// apply forwards cmd to the peer at addr. errNotLeader and errNotSent mean
// nothing was proposed.
func (c *peerClients) apply(ctx context.Context, addr string, cmd *fsmv1.Command) (any, error) {
	req := connect.NewRequest(&peerv1.ApplyRequest{Command: cmd})
	injectParent(ctx, req.Header())
	resp, err := c.client(addr).Apply(ctx, req)
	if err != nil {
		return nil, classify(err, "forward write")
	}
	return decodeResult(resp.Msg)
}

// applyBatch forwards cmds to the peer at addr in one call and returns
// one outcome per command (see resultOf). A failed call is classified as
// apply's error is. parents, when not empty, is the commands' trace
// context (batchTraceHeader).
func (c *peerClients) applyBatch(ctx context.Context, addr string, cmds []*fsmv1.Command, parents string) ([]*peerv1.ApplyOutcome, error) {
	req := connect.NewRequest(&peerv1.ApplyBatchRequest{Commands: cmds})
	if parents != "" {
		req.Header().Set(batchTraceHeader, parents)
	}
	resp, err := c.client(addr).ApplyBatch(ctx, req)
	if err != nil {
		if connect.CodeOf(err) == connect.CodeUnimplemented {
			return nil, errBatchUnsupported
		}
		return nil, classify(err, "forward writes")
	}
	if len(resp.Msg.Outcomes) != len(cmds) {
		return nil, fmt.Errorf("%w: forward writes: %d outcomes for %d commands", nodeapi.ErrUnknownOutcome, len(resp.Msg.Outcomes), len(cmds))
	}
	return resp.Msg.Outcomes, nil
}

// readIndex asks the peer at addr (the leader) for its read index.
func (c *peerClients) readIndex(ctx context.Context, addr string) (uint64, error) {
	req := connect.NewRequest(&peerv1.ReadIndexRequest{})
	resp, err := c.client(addr).ReadIndex(ctx, req)
	if err != nil {
		return 0, classify(err, "read index")
	}
	return resp.Msg.Index, nil
}

// classify maps a failed peer call to what the caller may do next.
func classify(err error, what string) error {
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Meta().Get(outcomeKey) == "not-applied" {
		switch ce.Code() {
		case connect.CodeFailedPrecondition:
			return errNotLeader
		case connect.CodeResourceExhausted:
			return storageFull(ce.Message())
		}
		return fmt.Errorf("%w: %s: %v", nodeapi.ErrNoLeader, what, ce.Message())
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("%w: %v", errNotSent, err)
	}
	// Anything else may have reached the leader: a timeout, a reset, a
	// leader that lost leadership after proposing.
	return fmt.Errorf("%w: %s: %v", nodeapi.ErrUnknownOutcome, what, err)
}

// encodeResult turns an applied command's result (or business rejection)
// into the wire form.
func encodeResult(res any, err error) (*peerv1.ApplyResponse, error) {
	if err != nil {
		rej, ok := rejectionOf(err)
		if !ok {
			return nil, err
		}
		return &peerv1.ApplyResponse{Result: &peerv1.ApplyResponse_Rejection{Rejection: rej}}, nil
	}
	switch r := res.(type) {
	case *fsm.AppendResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_Append{Append: &peerv1.AppendResult{
			Namespace: r.Namespace, Stream: r.Stream, FirstPosition: r.FirstPosition, LastPosition: r.LastPosition,
			FirstGlobalPosition: r.FirstGlobalPosition, LastGlobalPosition: r.LastGlobalPosition, Duplicate: r.Duplicate,
		}}}, nil
	case *fsm.AppendMultiResult:
		m := &peerv1.AppendMultiResult{Namespace: r.Namespace, FirstGlobalPosition: r.FirstGlobalPosition, LastGlobalPosition: r.LastGlobalPosition, Duplicate: r.Duplicate}
		for _, s := range r.Streams {
			m.Streams = append(m.Streams, &peerv1.AppendResult{Stream: s.Stream, FirstPosition: s.FirstPosition, LastPosition: s.LastPosition,
				FirstGlobalPosition: s.FirstGlobalPosition, LastGlobalPosition: s.LastGlobalPosition})
		}
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_AppendMulti{AppendMulti: m}}, nil
	case *fsm.ImportResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_Import{Import: &peerv1.ImportResult{
			Namespace: r.Namespace, Imported: int64(r.Imported), LastGlobalPosition: r.LastGlobalPosition,
		}}}, nil
	case *fsm.CreateNamespaceResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_CreateNamespace{CreateNamespace: &peerv1.CreateNamespaceResult{
			Name: r.Name, Id: r.ID, CreatedUnixNano: r.CreatedAt,
		}}}, nil
	case *fsm.DeleteNamespaceResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_DeleteNamespace{DeleteNamespace: &peerv1.DeleteNamespaceResult{
			Name: r.Name, MessagesDeleted: r.MessagesDeleted, DeletedUnixNano: r.DeletedAt,
		}}}, nil
	case *fsm.SetNodeInfoResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_SetNodeInfo{SetNodeInfo: true}}, nil
	case *fsm.WatermarkDeletionResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_WatermarkDeletion{WatermarkDeletion: &peerv1.WatermarkDeletionResult{
			Namespace: r.Namespace, MessagesDeleted: r.MessagesDeleted, Streams: r.Streams,
		}}}, nil
	case *fsm.StreamDeletionResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_StreamDeletion{StreamDeletion: &peerv1.StreamDeletionResult{
			Namespace: r.Namespace, Stream: r.Stream, MessagesDeleted: r.MessagesDeleted, Version: r.Version,
		}}}, nil
	case *fsm.RetentionPolicyResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_RetentionPolicy{RetentionPolicy: &peerv1.RetentionPolicyResult{
			Namespace: r.Namespace, Replaced: r.Replaced,
		}}}, nil
	case *fsm.ExpiryResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_Expiry{Expiry: &peerv1.ExpiryResult{
			Namespace: r.Namespace, MessagesDeleted: r.MessagesDeleted, Streams: r.Streams, More: r.More,
		}}}, nil
	case *fsm.GroupResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_Group{Group: &peerv1.GroupResult{Namespace: r.Namespace, Group: r.Group}}}, nil
	case *fsm.ParkedChangeResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_ParkedChange{ParkedChange: &peerv1.ParkedChangeResult{
			Namespace: r.Namespace, Group: r.Group, Changed: r.Changed, Parked: r.Parked,
		}}}, nil
	case *fsm.CredentialResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_Credential{Credential: &peerv1.CredentialResult{
			Namespace: r.Namespace, Name: r.Name}}}, nil
	case *fsm.IndexResult:
		return &peerv1.ApplyResponse{Index: r.Index, Result: &peerv1.ApplyResponse_IndexResult{IndexResult: &peerv1.IndexResult{
			Namespace: r.Namespace, Definition: r.Definition,
		}}}, nil
	}
	return nil, fmt.Errorf("node: cannot encode result %T", res)
}

func rejectionOf(err error) (*peerv1.Rejection, bool) {
	var (
		ve *fsm.ValidationError
		vc *fsm.VersionConflictError
		pe *fsm.PositionExistsError
		de *fsm.DuplicateIDError
		vs *fsm.VersionConflictsError
		cf *fsm.ConditionFailedError
		nl *fsm.NamespaceLimitError
		sl *nodeapi.SettingsLimitError
	)
	switch {
	case errors.As(err, &sl):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_SETTINGS_LIMIT, Namespace: sl.Namespace, Limit: sl.Limit, Description: sl.What}, true
	case errors.As(err, &nl):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_NAMESPACE_LIMIT, Namespace: nl.Name, Limit: nl.Limit}, true
	case errors.As(err, &cf):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_CONDITION_FAILED, GlobalPosition: cf.GlobalPosition, Position: cf.After}, true
	case errors.As(err, &de):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_DUPLICATE_ID, Record: int64(de.Message), Id: de.ID, Stream: de.Stream,
			Position: de.Position, GlobalPosition: de.GlobalPosition, DuplicateReason: string(de.Reason), Field: de.Field}, true
	case errors.As(err, &vs):
		r := &peerv1.Rejection{Reason: peerv1.Reason_REASON_VERSION_CONFLICTS}
		for _, c := range vs.Conflicts {
			r.Conflicts = append(r.Conflicts, &peerv1.StreamConflict{Stream: c.Stream, ExpectedVersion: c.Expected, ActualVersion: c.Actual})
		}
		return r, true
	case errors.As(err, &ve):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_INVALID, Field: ve.Field, Description: ve.Reason}, true
	case errors.As(err, &vc):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_VERSION_CONFLICT, Stream: vc.Stream, ExpectedVersion: vc.Expected, ActualVersion: vc.Actual}, true
	case errors.As(err, &pe):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_POSITION_EXISTS, Record: int64(pe.Record), Stream: pe.Stream,
			Position: pe.Position, GlobalPosition: pe.GlobalPosition, Description: pe.Reason}, true
	case errors.Is(err, fsm.ErrNamespaceNotFound):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_NAMESPACE_NOT_FOUND}, true
	case errors.Is(err, fsm.ErrNamespaceExists):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_NAMESPACE_EXISTS}, true
	case errors.Is(err, fsm.ErrBadCommand):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_BAD_COMMAND, Message: err.Error()}, true
	case errors.Is(err, fsm.ErrStreamNotFound):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_STREAM_NOT_FOUND, Message: err.Error()}, true
	case errors.Is(err, fsm.ErrStreamDeleted):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_STREAM_DELETED, Message: err.Error()}, true
	case errors.Is(err, fsm.ErrGroupNotFound):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_GROUP_NOT_FOUND, Message: err.Error()}, true
	case errors.Is(err, fsm.ErrGroupExists):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_GROUP_EXISTS, Message: err.Error()}, true
	case errors.Is(err, fsm.ErrParkedNotFound):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_PARKED_NOT_FOUND, Message: err.Error()}, true
	case errors.Is(err, fsm.ErrCredentialNotFound):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_CREDENTIAL_NOT_FOUND, Message: err.Error()}, true
	case errors.Is(err, fsm.ErrCredentialExists):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_CREDENTIAL_EXISTS, Message: err.Error()}, true
	case errors.Is(err, fsm.ErrIndexExists):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_INDEX_EXISTS, Message: err.Error()}, true
	case errors.Is(err, fsm.ErrIndexNotFound):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_INDEX_NOT_FOUND, Message: err.Error()}, true
	case errors.Is(err, nodeapi.ErrUpgradeRequired):
		return &peerv1.Rejection{Reason: peerv1.Reason_REASON_UPGRADE_REQUIRED, Message: err.Error()}, true
	}
	return groupRejectionOf(err)
}

// decodeResult is the inverse of encodeResult.
func decodeResult(m *peerv1.ApplyResponse) (any, error) {
	switch r := m.Result.(type) {
	case *peerv1.ApplyResponse_Append:
		a := r.Append
		return &fsm.AppendResult{Namespace: a.Namespace, Stream: a.Stream, FirstPosition: a.FirstPosition, LastPosition: a.LastPosition,
			FirstGlobalPosition: a.FirstGlobalPosition, LastGlobalPosition: a.LastGlobalPosition, Index: m.Index, Duplicate: a.Duplicate}, nil
	case *peerv1.ApplyResponse_AppendMulti:
		a := r.AppendMulti
		res := &fsm.AppendMultiResult{Namespace: a.Namespace, FirstGlobalPosition: a.FirstGlobalPosition, LastGlobalPosition: a.LastGlobalPosition,
			Index: m.Index, Duplicate: a.Duplicate, Streams: make([]fsm.StreamResult, len(a.Streams))}
		for i, s := range a.Streams {
			res.Streams[i] = fsm.StreamResult{Stream: s.Stream, FirstPosition: s.FirstPosition, LastPosition: s.LastPosition,
				FirstGlobalPosition: s.FirstGlobalPosition, LastGlobalPosition: s.LastGlobalPosition}
		}
		return res, nil
	case *peerv1.ApplyResponse_Import:
		return &fsm.ImportResult{Namespace: r.Import.Namespace, Imported: int(r.Import.Imported), LastGlobalPosition: r.Import.LastGlobalPosition, Index: m.Index}, nil
	case *peerv1.ApplyResponse_CreateNamespace:
		c := r.CreateNamespace
		return &fsm.CreateNamespaceResult{Name: c.Name, ID: c.Id, CreatedAt: c.CreatedUnixNano, Index: m.Index}, nil
	case *peerv1.ApplyResponse_DeleteNamespace:
		d := r.DeleteNamespace
		return &fsm.DeleteNamespaceResult{Name: d.Name, MessagesDeleted: d.MessagesDeleted, DeletedAt: d.DeletedUnixNano, Index: m.Index}, nil
	case *peerv1.ApplyResponse_SetNodeInfo:
		return &fsm.SetNodeInfoResult{Index: m.Index}, nil
	case *peerv1.ApplyResponse_WatermarkDeletion:
		w := r.WatermarkDeletion
		return &fsm.WatermarkDeletionResult{Namespace: w.Namespace, MessagesDeleted: w.MessagesDeleted, Streams: w.Streams, Index: m.Index}, nil
	case *peerv1.ApplyResponse_StreamDeletion:
		d := r.StreamDeletion
		return &fsm.StreamDeletionResult{Namespace: d.Namespace, Stream: d.Stream, MessagesDeleted: d.MessagesDeleted, Version: d.Version, Index: m.Index}, nil
	case *peerv1.ApplyResponse_RetentionPolicy:
		return &fsm.RetentionPolicyResult{Namespace: r.RetentionPolicy.Namespace, Replaced: r.RetentionPolicy.Replaced, Index: m.Index}, nil
	case *peerv1.ApplyResponse_Expiry:
		e := r.Expiry
		return &fsm.ExpiryResult{Namespace: e.Namespace, MessagesDeleted: e.MessagesDeleted, Streams: e.Streams, More: e.More, Index: m.Index}, nil
	case *peerv1.ApplyResponse_Group:
		return &fsm.GroupResult{Namespace: r.Group.Namespace, Group: r.Group.Group, Index: m.Index}, nil
	case *peerv1.ApplyResponse_ParkedChange:
		c := r.ParkedChange
		return &fsm.ParkedChangeResult{Namespace: c.Namespace, Group: c.Group, Changed: c.Changed, Parked: c.Parked, Index: m.Index}, nil
	case *peerv1.ApplyResponse_Credential:
		return &fsm.CredentialResult{Namespace: r.Credential.Namespace, Name: r.Credential.Name, Index: m.Index}, nil
	case *peerv1.ApplyResponse_IndexResult:
		return &fsm.IndexResult{Namespace: r.IndexResult.Namespace, Definition: r.IndexResult.Definition, Index: m.Index}, nil
	case *peerv1.ApplyResponse_Rejection:
		return nil, errorOf(r.Rejection)
	}
	return nil, fmt.Errorf("%w: peer sent an empty result", nodeapi.ErrUnknownOutcome)
}

func errorOf(r *peerv1.Rejection) error {
	switch r.Reason {
	case peerv1.Reason_REASON_INVALID:
		return &fsm.ValidationError{Field: r.Field, Reason: r.Description}
	case peerv1.Reason_REASON_VERSION_CONFLICT:
		return &fsm.VersionConflictError{Stream: r.Stream, Expected: r.ExpectedVersion, Actual: r.ActualVersion}
	case peerv1.Reason_REASON_DUPLICATE_ID:
		return &fsm.DuplicateIDError{Message: int(r.Record), Field: r.Field, ID: r.Id, Stream: r.Stream, Position: r.Position, GlobalPosition: r.GlobalPosition,
			Reason: fsm.DuplicateReason(r.DuplicateReason)}
	case peerv1.Reason_REASON_VERSION_CONFLICTS:
		e := &fsm.VersionConflictsError{}
		for _, c := range r.Conflicts {
			e.Conflicts = append(e.Conflicts, fsm.VersionConflictError{Stream: c.Stream, Expected: c.ExpectedVersion, Actual: c.ActualVersion})
		}
		return e
	case peerv1.Reason_REASON_CONDITION_FAILED:
		return &fsm.ConditionFailedError{After: r.Position, GlobalPosition: r.GlobalPosition}
	case peerv1.Reason_REASON_POSITION_EXISTS:
		return &fsm.PositionExistsError{Record: int(r.Record), Stream: r.Stream, Position: r.Position, GlobalPosition: r.GlobalPosition, Reason: r.Description}
	case peerv1.Reason_REASON_NAMESPACE_NOT_FOUND:
		return fsm.ErrNamespaceNotFound
	case peerv1.Reason_REASON_NAMESPACE_EXISTS:
		return fsm.ErrNamespaceExists
	case peerv1.Reason_REASON_NAMESPACE_LIMIT:
		return &fsm.NamespaceLimitError{Name: r.Namespace, Limit: r.Limit}
	case peerv1.Reason_REASON_SETTINGS_LIMIT:
		return &nodeapi.SettingsLimitError{Namespace: r.Namespace, What: r.Description, Limit: r.Limit}
	case peerv1.Reason_REASON_BAD_COMMAND:
		return fmt.Errorf("%w: %s", fsm.ErrBadCommand, r.Message)
	case peerv1.Reason_REASON_CREDENTIAL_NOT_FOUND:
		return fmt.Errorf("%w: %s", fsm.ErrCredentialNotFound, strings.TrimPrefix(r.Message, fsm.ErrCredentialNotFound.Error()+": "))
	case peerv1.Reason_REASON_CREDENTIAL_EXISTS:
		return fmt.Errorf("%w: %s", fsm.ErrCredentialExists, strings.TrimPrefix(r.Message, fsm.ErrCredentialExists.Error()+": "))
	case peerv1.Reason_REASON_STREAM_NOT_FOUND:
		return fmt.Errorf("%w: %s", fsm.ErrStreamNotFound, strings.TrimPrefix(r.Message, fsm.ErrStreamNotFound.Error()+": "))
	case peerv1.Reason_REASON_STREAM_DELETED:
		return fmt.Errorf("%w: %s", fsm.ErrStreamDeleted, strings.TrimPrefix(r.Message, fsm.ErrStreamDeleted.Error()+": "))
	case peerv1.Reason_REASON_INDEX_EXISTS:
		return fmt.Errorf("%w: %s", fsm.ErrIndexExists, strings.TrimPrefix(r.Message, fsm.ErrIndexExists.Error()+": "))
	case peerv1.Reason_REASON_INDEX_NOT_FOUND:
		return fmt.Errorf("%w: %s", fsm.ErrIndexNotFound, strings.TrimPrefix(r.Message, fsm.ErrIndexNotFound.Error()+": "))
	case peerv1.Reason_REASON_UPGRADE_REQUIRED:
		return fmt.Errorf("%w: %s", nodeapi.ErrUpgradeRequired, strings.TrimPrefix(r.Message, nodeapi.ErrUpgradeRequired.Error()+": "))
	case peerv1.Reason_REASON_GROUP_NOT_FOUND, peerv1.Reason_REASON_GROUP_EXISTS, peerv1.Reason_REASON_PARKED_NOT_FOUND,
		peerv1.Reason_REASON_NOT_IN_FLIGHT, peerv1.Reason_REASON_TOO_MANY_CONSUMERS:
		return groupErrorOf(r)
	}
	return fmt.Errorf("node: unknown rejection %v: %s", r.Reason, r.Message)
}

func (p *peerServer) Stats(context.Context, *connect.Request[peerv1.StatsRequest]) (*connect.Response[peerv1.StatsResponse], error) {
	return connect.NewResponse(p.n.localStats()), nil
}

// localStats is this node's Raft progress as autopilot wants it, and its
// applied index for Cluster.Status.
func (n *Node) localStats() *peerv1.StatsResponse {
	resp := &peerv1.StatsResponse{LastTerm: n.raft.CurrentTerm(), LastIndex: n.raft.LastIndex(), LastContactNanos: -1, AppliedIndex: n.AppliedIndex(),
		StateMachineVersion: n.stateMachineVersion()}
	if free, ok := n.localFreeDisk(); ok {
		resp.FreeDiskBytes = &free
	}
	if n.IsLeader() {
		resp.LastContactNanos = 0
	} else if lc := n.raft.LastContact(); !lc.IsZero() {
		resp.LastContactNanos = int64(time.Since(lc))
	}
	return resp
}

// stats asks the peer at addr for its Raft progress.
func (c *peerClients) stats(ctx context.Context, addr string) (*peerv1.StatsResponse, error) {
	req := connect.NewRequest(&peerv1.StatsRequest{})
	resp, err := c.client(addr).Stats(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func (p *peerServer) RemoveServer(ctx context.Context, req *connect.Request[peerv1.RemoveServerRequest]) (*connect.Response[peerv1.RemoveServerResponse], error) {
	err := p.n.removeServerLocal(ctx, req.Msg.Id)
	if errors.Is(err, errNotLeader) {
		return nil, notApplied(connect.CodeFailedPrecondition, err)
	}
	if errors.Is(err, nodeapi.ErrUnknownServer) {
		return nil, notApplied(connect.CodeNotFound, err)
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	return connect.NewResponse(&peerv1.RemoveServerResponse{}), nil
}

// removeServer asks the peer at addr (the leader) to remove server id.
func (c *peerClients) removeServer(ctx context.Context, addr, id string) error {
	req := connect.NewRequest(&peerv1.RemoveServerRequest{Id: id})
	if _, err := c.client(addr).RemoveServer(ctx, req); err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) && ce.Code() == connect.CodeNotFound && ce.Meta().Get(outcomeKey) == "not-applied" {
			return fmt.Errorf("%w: %q", nodeapi.ErrUnknownServer, id)
		}
		return classify(err, "remove server")
	}
	return nil
}
