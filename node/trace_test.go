package node

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The trace context of a coalesced forward: batchParents writes one
// traceparent per write, "-" for an untraced one, and the leader's
// peerParents gives each command its own parent, or nothing at all when
// the header does not hold one value per command or tracing is off.
func TestBatchTraceHeader(t *testing.T) {
	t.Parallel()
	sc := func(b byte) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{b, 1}, SpanID: trace.SpanID{b, 2}, TraceFlags: trace.FlagsSampled})
	}
	calls := []*forwardCall{{parent: sc(1)}, {}, {parent: sc(3)}}
	header := batchParents(calls)
	if want := "00-01010000000000000000000000000000-0102000000000000-01,-,00-03010000000000000000000000000000-0302000000000000-01"; header != want {
		t.Fatalf("batchParents = %q, want %q", header, want)
	}
	if got := batchParents([]*forwardCall{{}, {}}); got != "" {
		t.Fatalf("batchParents of untraced writes = %q, want none", got)
	}

	traced := &Node{tracer: noop.NewTracerProvider().Tracer("test")}
	cases := []struct {
		name   string
		n      *Node
		header string
		count  int
		want   []trace.SpanContext // nil: no per-command contexts
	}{
		{"one per command", traced, header, 3, []trace.SpanContext{sc(1), {}, sc(3)}},
		{"fewer values than commands", traced, header, 4, nil},
		{"more values than commands", traced, header, 2, nil},
		{"no header", traced, "", 3, nil},
		{"not a traceparent", traced, "00-zz-zz-01,-", 2, []trace.SpanContext{{}, {}}},
		{"tracing off", &Node{}, header, 3, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set(batchTraceHeader, tc.header)
			}
			got := tc.n.peerParents(context.Background(), h, tc.count)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("got %d contexts, want none", len(got))
				}
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d contexts, want %d", len(got), len(tc.want))
			}
			for i, ctx := range got {
				sc := trace.SpanContextFromContext(ctx)
				if sc.TraceID() != tc.want[i].TraceID() || sc.SpanID() != tc.want[i].SpanID() {
					t.Errorf("command %d: parent %v/%v, want %v/%v", i, sc.TraceID(), sc.SpanID(), tc.want[i].TraceID(), tc.want[i].SpanID())
				}
				if sc.IsValid() && !sc.IsRemote() {
					t.Errorf("command %d: parent not marked remote", i)
				}
			}
		})
	}
}

// applyClock: a watched entry gets the times of the batch that applied
// it; an entry never applied (leadership lost) has none; take forgets.
func TestApplyClock(t *testing.T) {
	t.Parallel()
	c := newApplyClock()
	applied, lost := []byte("applied"), []byte("lost")
	c.watch(&applied[0])
	c.watch(&lost[0])
	other := []byte("applied") // equal bytes, another entry
	received := time.Unix(100, 0)
	c.observe([]*raft.Log{{Data: other}, {Data: applied}, {}}, received, received.Add(time.Millisecond))

	got, ok := c.take(&applied[0])
	if !ok || !got.received.Equal(received) || !got.applied.Equal(received.Add(time.Millisecond)) || got.batch != 3 {
		t.Fatalf("applied entry: %+v %v, want received %v, applied 1ms later, batch 3", got, ok, received)
	}
	if _, ok := c.take(&applied[0]); ok {
		t.Fatal("an entry taken twice")
	}
	if got, ok := c.take(&lost[0]); ok {
		t.Fatalf("an entry never applied has times %+v", got)
	}
	if len(c.pending) != 0 {
		t.Fatalf("%d entries left pending", len(c.pending))
	}
}
