package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// The reply budget bounds, across every connection of the node, the bytes
// of replies read from the store and not yet written to their clients'
// connections. A page cap bounds one reply; without a total, every client
// that opens reads and never reads the answers holds a page (and its
// encoding) until its write times out, and at --max-connections that is
// tens of GB.
//
// A read reserves its page's bytes (the page cap: what it may read) before
// it reads, keeps what its page turned out to weigh once read, and gives
// it all back when its reply has been written: for a unary call once the
// HTTP handler returns (net/http and its HTTP/2 server return only after
// the reply was handed to the connection within its flow-control window);
// for a stream after each page was sent. A read that finds the budget spent
// waits up to Limits.ReplyBudgetWait for replies to drain, then is refused
// with errReplyBudget (ResourceExhausted; EventoDB 503 SERVER_BUSY), having
// read nothing.
//
// The budget counts a page as the page cap does (fsm.Message.Size); a
// reply's heap is about twice that while it is encoded and written.

// errReplyBudget refuses a read while the node's reply budget is spent.
var errReplyBudget = errors.New("the node is holding as many replies for clients as --reply-budget-bytes allows " +
	"(clients that do not read them); retry shortly")

// replyOverhead is what a reservation keeps beyond its page's counted
// bytes: the reply's other fields and framing.
const replyOverhead = 4 << 10

// replyBudget is the node's budget (NewHandler makes one).
//
// INVARIANT: inUse is the sum of every hold's held, and at most total: a
// hold never asks for more than total (a page cap above the budget is
// clamped to it, so such a read runs alone).
type replyBudget struct {
	sem     *semaphore.Weighted
	total   int64
	wait    time.Duration
	inUse   atomic.Int64
	refused prometheus.Counter
}

// newReplyBudget returns a budget of total bytes whose reads wait up to
// wait for room, its metrics registered with reg.
func newReplyBudget(total int64, wait time.Duration, reg prometheus.Registerer) *replyBudget {
	b := &replyBudget{sem: semaphore.NewWeighted(total), total: total, wait: wait,
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "rpc", Name: "reply_budget_refused_total",
			Help: "Reads refused because the node's reply budget (--reply-budget-bytes) was spent.",
		})}
	inUse := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "skald", Subsystem: "rpc", Name: "reply_budget_bytes",
		Help: "Bytes of the node's reply budget (--reply-budget-bytes) held by replies read and not yet written.",
	}, func() float64 { return float64(b.inUse.Load()) })
	for _, c := range []prometheus.Collector{b.refused, inUse} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(err)
			}
			if ctr, ok := are.ExistingCollector.(prometheus.Counter); ok && c == b.refused {
				b.refused = ctr
			}
		}
	}
	return b
}

// hold returns an empty hold of one request on b; nil for a nil budget
// (no budget: nothing is reserved).
func (b *replyBudget) hold() *replyHold {
	if b == nil {
		return nil
	}
	return &replyHold{b: b}
}

// replyHold is what one request holds of the budget. It belongs to the
// request's goroutine. A nil hold (a request no budget covers) reserves
// nothing and never refuses.
type replyHold struct {
	b    *replyBudget
	held int64
}

// reserve takes n more bytes for the request, waiting up to the budget's
// wait for them; it fails with errReplyBudget when they do not free up in
// time, or with ctx's error.
func (h *replyHold) reserve(ctx context.Context, n int) error {
	if h == nil || n <= 0 {
		return nil
	}
	want := min(int64(n), h.b.total-h.held)
	if want <= 0 {
		return nil
	}
	if !h.b.sem.TryAcquire(want) {
		wctx, cancel := context.WithTimeout(ctx, h.b.wait)
		err := h.b.sem.Acquire(wctx, want)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			h.b.refused.Inc()
			return fmt.Errorf("%w (%d bytes held of %d)", errReplyBudget, h.b.inUse.Load(), h.b.total)
		}
	}
	h.held += want
	h.b.inUse.Add(want)
	return nil
}

// keep gives back all but n of the bytes held: the reply turned out to
// weigh n.
func (h *replyHold) keep(n int) {
	if h == nil {
		return
	}
	if back := h.held - max(int64(n), 0); back > 0 {
		h.held -= back
		h.b.inUse.Add(-back)
		h.b.sem.Release(back)
	}
}

// release gives back every byte held: the reply was written (or will not
// be).
func (h *replyHold) release() { h.keep(0) }

// holdFrom is the reply hold of the request ctx belongs to (nil if none).
func holdFrom(ctx context.Context) *replyHold { return callerFrom(ctx).hold }
