package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// maxForwardCalls bounds the ApplyBatch calls a follower has in flight to
// one leader. A write that finds them all busy waits for the next one and
// shares it with every write that arrived meanwhile: under load a handful
// of calls carry hundreds of writes; when idle, each write goes at once.
const maxForwardCalls = 2

// errBatchUnsupported: the leader does not know ApplyBatch (an older
// version during a rolling upgrade); nothing was proposed.
var errBatchUnsupported = errors.New("node: leader does not support ApplyBatch")

// forwarder coalesces the writes a follower forwards to the leader.
//
// Invariant: a write leaves its queue at most once, and only into a call
// that is then sent; a write its caller gave up on before that never
// reaches the leader.
type forwarder struct {
	life    context.Context // the node's: calls end when it closes
	peers   *peerClients
	timeout time.Duration // bounds one call; it carries many writes, so no caller's context
	onCall  func(writes int)
	traced  bool // Config.TracerProvider is set: each write carries its span context

	mu     sync.Mutex
	queues map[string]*forwardQueue // by leader API address
}

type forwardQueue struct {
	pending []*forwardCall
	calls   int // ApplyBatch calls in flight
}

// forwardCall is one write waiting for its outcome.
type forwardCall struct {
	cmd    *fsmv1.Command
	parent trace.SpanContext // the write's node.forward span, when traced
	taken  bool              // in a call (under forwarder.mu)
	done   chan struct{}
	res    *fsmv1.Result
	err    error
}

func newForwarder(life context.Context, peers *peerClients, timeout time.Duration, onCall func(writes int)) *forwarder {
	return &forwarder{life: life, peers: peers, timeout: timeout, onCall: onCall, queues: make(map[string]*forwardQueue)}
}

// apply forwards cmd to the leader at addr with apply's contract:
// errNotLeader and errNotSent mean nothing was proposed, and so does the
// caller's context error returned unwrapped (the write never left).
func (f *forwarder) apply(ctx context.Context, addr string, cmd *fsmv1.Command) (*fsmv1.Result, error) {
	c := &forwardCall{cmd: cmd, done: make(chan struct{})}
	if f.traced {
		c.parent = trace.SpanContextFromContext(ctx)
	}
	f.mu.Lock()
	q := f.queues[addr]
	if q == nil {
		q = &forwardQueue{}
		f.queues[addr] = q
	}
	q.pending = append(q.pending, c)
	if q.calls < maxForwardCalls {
		q.calls++
		go f.send(addr, q)
	}
	f.mu.Unlock()

	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
	}
	f.mu.Lock()
	taken := c.taken
	if !taken {
		q.pending = slices.DeleteFunc(q.pending, func(p *forwardCall) bool { return p == c })
	}
	f.mu.Unlock()
	if !taken {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("%w: forwarded write: %v", nodeapi.ErrUnknownOutcome, ctx.Err())
}

// send makes calls for addr's queue until it is empty.
func (f *forwarder) send(addr string, q *forwardQueue) {
	for {
		f.mu.Lock()
		if len(q.pending) == 0 {
			q.calls--
			if q.calls == 0 {
				delete(f.queues, addr)
			}
			f.mu.Unlock()
			return
		}
		n := min(len(q.pending), maxForwardBatch)
		batch := slices.Clone(q.pending[:n])
		q.pending = slices.Delete(q.pending, 0, n)
		for _, c := range batch {
			c.taken = true
		}
		f.mu.Unlock()
		f.onCall(len(batch))
		f.call(addr, batch)
	}
}

// call sends one batch and hands every write its outcome.
func (f *forwarder) call(addr string, batch []*forwardCall) {
	defer func() {
		for _, c := range batch {
			close(c.done)
		}
	}()
	ctx, cancel := context.WithTimeout(f.life, f.timeout)
	defer cancel()
	cmds := make([]*fsmv1.Command, len(batch))
	for i, c := range batch {
		cmds[i] = c.cmd
	}
	var parents string
	if f.traced {
		parents = batchParents(batch)
	}
	outcomes, err := f.peers.applyBatch(ctx, addr, cmds, parents)
	if errors.Is(err, errBatchUnsupported) {
		concurrently(len(batch), func(i int) {
			c, ctx := batch[i], ctx
			if c.parent.IsValid() {
				ctx = trace.ContextWithSpanContext(ctx, c.parent)
			}
			c.res, c.err = f.peers.apply(ctx, addr, c.cmd)
		})
		return
	}
	for i, c := range batch {
		if err != nil {
			c.err = err
			continue
		}
		c.res, c.err = resultOf(outcomes[i])
	}
}
