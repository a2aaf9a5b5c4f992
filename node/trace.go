package node

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/skalddb/skald/node/nodeapi"
)

// Tracing (OpenTelemetry; Config.TracerProvider). Off by default: then
// Node.tracer is nil, no span is started, no header is read or written,
// and the state machine keeps no clock, so the write path pays a nil
// check.
//
// A node traces only work that belongs to a traced request: a span is
// started only under a context that already carries a valid span context
// (the API handler's, or one propagated from a member). Background work
// (retention expiry, group checkpoints, the type index backfill) starts
// no trace of its own.
//
// The spans of a write:
//
//	node.forward   (client, the follower)  the write's hop to the leader
//	raft.propose   (the leader; server when forwarded)  stamp, propose, wait for the result
//	  raft.commit  from the proposal until the state machine received the committed entry
//	  fsm.apply    the state machine batch that applied it
//
// raft.commit and fsm.apply are made by the proposer after the fact, with
// the times the state machine recorded (applyClock): Raft's goroutines
// never touch a span.

// tracerName is the instrumentation scope of the node's spans.
const tracerName = "github.com/skalddb/skald/node"

// batchTraceHeader carries, on a forwarded ApplyBatch call, one W3C
// traceparent per command, comma-separated in the order of the commands
// ("-" for a command whose write is not traced): the writes of one call belong to
// different traces, so the call's own traceparent header could not name
// their parents. The peer service is served on the cluster port only,
// where mutual TLS has proven the caller a member.
const batchTraceHeader = "Skald-Traceparent"

// traceContext is the one propagation format: W3C trace context, no
// baggage.
var traceContext propagation.TraceContext

// startSpan starts a span named name under ctx's span, or does nothing
// (returning ctx and a span that records nothing) when tracing is off or
// ctx carries no span context. It takes no attributes, so an untraced
// call builds none: set them on the span when it IsRecording.
func (n *Node) startSpan(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if n.tracer == nil {
		return ctx, noSpan
	}
	parent := trace.SpanContextFromContext(ctx)
	if !parent.IsValid() {
		return ctx, noSpan
	}
	if kind == trace.SpanKindInternal && parent.IsRemote() {
		kind = trace.SpanKindServer // the leader's side of a forwarded write
	}
	return n.tracer.Start(ctx, name, trace.WithSpanKind(kind))
}

// noSpan is the span of untraced work: it records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// endSpan ends span, marking it failed when err is not nil. The status
// names the kind of failure only: an error's message may name a stream,
// which spans never carry (docs/security.md).
func endSpan(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, failureKind(err))
	}
	span.End()
}

// failureKind is what a span says of a failed write.
func failureKind(err error) string {
	switch {
	case errors.Is(err, errNotLeader):
		return "not leader"
	case errors.Is(err, errNotSent):
		return "not sent"
	case errors.Is(err, nodeapi.ErrNoLeader):
		return "no leader"
	case errors.Is(err, nodeapi.ErrUnknownOutcome):
		return "unknown outcome"
	case errors.Is(err, nodeapi.ErrStorageFull):
		return "storage full"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "caller gave up"
	}
	return "rejected"
}

// traceCommit, called just before a traced proposal of data is handed to
// Raft at start, returns what to call once Raft answered: it records the
// raft.commit and fsm.apply spans of the entry under ctx's span (none
// when the state machine never applied it here, e.g. leadership was lost).
// Untraced, it does nothing.
func (n *Node) traceCommit(ctx context.Context, data []byte, start time.Time) (done func()) {
	span := trace.SpanFromContext(ctx)
	if n.tracer == nil || !span.IsRecording() || len(data) == 0 {
		return func() {}
	}
	key := &data[0]
	n.sm.clock.watch(key)
	return func() {
		t, ok := n.sm.clock.take(key)
		if !ok {
			return
		}
		_, commit := n.tracer.Start(ctx, "raft.commit", trace.WithTimestamp(start))
		commit.End(trace.WithTimestamp(t.received))
		_, apply := n.tracer.Start(ctx, "fsm.apply", trace.WithTimestamp(t.received),
			trace.WithAttributes(attribute.Int("skald.apply.batch_entries", t.batch)))
		apply.End(trace.WithTimestamp(t.applied))
	}
}

// applyClock records when the state machine received and applied the
// entries traced proposals wait for. An entry is known by the first byte
// of its data: on the leader Raft hands the state machine the proposed
// raft.Log itself (its future's), whose Data is the proposer's slice.
//
// INVARIANT: an entry is in pending only between watch and take, which
// its proposer calls around its proposal; the map is empty when nothing
// traced is in flight.
type applyClock struct {
	mu      sync.Mutex
	pending map[*byte]*entryTimes
}

// entryTimes is when the state machine received an entry's batch, when
// it had applied it, and how many entries the batch held.
type entryTimes struct {
	received, applied time.Time
	batch             int
}

func newApplyClock() *applyClock { return &applyClock{pending: make(map[*byte]*entryTimes)} }

func (c *applyClock) watch(key *byte) {
	c.mu.Lock()
	c.pending[key] = &entryTimes{}
	c.mu.Unlock()
}

// take forgets key and returns its times, if the state machine applied it.
func (c *applyClock) take(key *byte) (entryTimes, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.pending[key]
	delete(c.pending, key)
	if t == nil || t.applied.IsZero() {
		return entryTimes{}, false
	}
	return *t, true
}

// observe records a batch of logs, received and applied at the given
// times. It is called from Raft's one state machine goroutine.
func (c *applyClock) observe(logs []*raft.Log, received, applied time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return
	}
	for _, l := range logs {
		if len(l.Data) == 0 {
			continue
		}
		if t := c.pending[&l.Data[0]]; t != nil {
			t.received, t.applied, t.batch = received, applied, len(logs)
		}
	}
}

// withParent returns ctx under the span context of a W3C traceparent
// value (one of batchTraceHeader's), or ctx itself when the value is not
// one.
func withParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" || traceparent == "-" {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// traceparentOf is sc as a W3C traceparent value, "-" when sc is not
// valid.
func traceparentOf(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return "-"
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c.Get("traceparent")
}

// batchParents returns the batchTraceHeader value for calls, or "" when
// none of them is traced.
func batchParents(calls []*forwardCall) string {
	var out []string
	for i, c := range calls {
		if !c.parent.IsValid() {
			continue
		}
		if out == nil {
			out = make([]string, len(calls))
			for j := range out {
				out[j] = "-"
			}
		}
		out[i] = traceparentOf(c.parent)
	}
	return strings.Join(out, ",")
}

// peerParents returns, for a received ApplyBatch of n commands, each
// command's context: under its batchTraceHeader parent when the header
// holds one value per command, else ctx. Nil when tracing is off or the
// call carries no such header.
func (n *Node) peerParents(ctx context.Context, h http.Header, count int) []context.Context {
	if n.tracer == nil {
		return nil
	}
	header := h.Get(batchTraceHeader)
	if header == "" {
		return nil
	}
	values := strings.Split(header, ",")
	if len(values) != count {
		return nil // none, or not one per command: trace nothing rather than misattribute
	}
	out := make([]context.Context, count)
	for i, v := range values {
		out[i] = withParent(ctx, v)
	}
	return out
}

// peerParent returns ctx under the traceparent of a received Apply call,
// when tracing is on and the call carries one.
func (n *Node) peerParent(ctx context.Context, h http.Header) context.Context {
	if n.tracer == nil {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.HeaderCarrier(h))
}

// injectParent writes ctx's span context to h as a traceparent header,
// when there is one.
func injectParent(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		traceContext.Inject(ctx, propagation.HeaderCarrier(h))
	}
}
