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

func (p *peerServer) Apply(ctx context.Context, req *connect.Request[peerv1.ApplyRequest]) (*connect.Response[fsmv1.Result], error) {
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
	case err != nil:
		rej, ok := rejectionOf(err)
		if !ok {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
		res = &fsmv1.Result{Result: &fsmv1.Result_Rejection{Rejection: rej}}
	}
	return connect.NewResponse(res), nil
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
	concurrently(len(cmds), func(i int) {
		ctx := ctx
		if parents != nil {
			ctx = parents[i]
		}
		out[i] = outcomeOf(p.n.applyLocal(ctx, cmds[i]))
	})
	return connect.NewResponse(&peerv1.ApplyBatchResponse{Outcomes: out}), nil
}

// concurrently calls f(0) to f(n-1), each on its own goroutine, and
// returns once all have: commands proposed this way reach Raft together,
// so it batches them into as few log writes as it can (each still its
// own entry).
func concurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}

// outcomeOf is what Apply answers for one command, as a batch outcome.
func outcomeOf(res *fsmv1.Result, err error) *peerv1.ApplyOutcome {
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
	case err != nil:
		rej, ok := rejectionOf(err)
		if !ok {
			return fail(peerv1.FailureKind_FAILURE_KIND_UNKNOWN, err)
		}
		res = &fsmv1.Result{Result: &fsmv1.Result_Rejection{Rejection: rej}}
	}
	return &peerv1.ApplyOutcome{Outcome: &peerv1.ApplyOutcome_Response{Response: res}}
}

// storageFull rebuilds the leader's nodeapi.ErrStorageFull from its message.
func storageFull(msg string) error {
	return fmt.Errorf("%w: %s", nodeapi.ErrStorageFull, strings.TrimPrefix(msg, nodeapi.ErrStorageFull.Error()+": "))
}

// resultOf is the inverse of outcomeOf.
func resultOf(o *peerv1.ApplyOutcome) (*fsmv1.Result, error) {
	switch r := o.GetOutcome().(type) {
	case *peerv1.ApplyOutcome_Response:
		return answer(r.Response)
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

// answer is the leader's Result as Apply returns it: a rejection becomes
// its error (rejection.go), anything else is returned as it came.
func answer(res *fsmv1.Result) (*fsmv1.Result, error) {
	switch r := res.GetResult().(type) {
	case nil:
		return nil, fmt.Errorf("%w: peer sent an empty result", nodeapi.ErrUnknownOutcome)
	case *fsmv1.Result_Rejection:
		return nil, errorOf(r.Rejection)
	}
	return res, nil
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
func (c *peerClients) apply(ctx context.Context, addr string, cmd *fsmv1.Command) (*fsmv1.Result, error) {
	req := connect.NewRequest(&peerv1.ApplyRequest{Command: cmd})
	injectParent(ctx, req.Header())
	resp, err := c.client(addr).Apply(ctx, req)
	if err != nil {
		return nil, classify(err, "forward write")
	}
	return answer(resp.Msg)
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
