package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/rpc"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestTraceOfForwardedAppend: an append sent to a follower, by the Go
// client and over the EventoDB API, each under an application's span, is
// one trace: the API handler's span on the follower (child of the
// application's span, from the traceparent it sent), its forward hop to
// the leader, the leader's proposal under that hop (trace context carried
// over the peer service), the proposal's Raft commit and apply, and the
// follower's reply. Every member and the application share one
// provider and its in-process exporter.
func TestTraceOfForwardedAppend(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })

	cl := testcluster.StartWith(t, 3, rpc.Options{TracerProvider: tp})
	token := cl.CreateNamespace(t, "traced", 0)
	leader := cl.Leader()
	follower := cl.Followers()[0]

	cases := []struct {
		name    string
		handler string // the API handler's span name
		send    func(t *testing.T, ctx context.Context)
	}{
		{"connect", "skald.v1.EventStore/Append", func(t *testing.T, ctx context.Context) {
			c, err := client.New(ctx, client.Config{Endpoints: []string{follower.Addr}, Token: token, Pinned: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Append(ctx, "traced-1", []client.NewMessage{event(1)}); err != nil {
				t.Fatalf("append through the follower: %v", err)
			}
		}},
		{"eventodb", "eventodb/stream.write", func(t *testing.T, ctx context.Context) {
			body := `["stream.write", "traced-2", {"type": "Placed", "data": {"n": 2}}]`
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+follower.Addr+"/rpc", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			sc := trace.SpanContextFromContext(ctx)
			req.Header.Set("traceparent", fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags()))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("stream.write through the follower: %d %s", resp.StatusCode, b)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, root := tp.Tracer("test").Start(ctxT(t), "app")
			tc.send(t, ctx)
			root.End()

			want := []string{"app", tc.handler, "node.forward", "raft.propose", "raft.commit", "fsm.apply", "reply"}
			var (
				spans map[string]tracetest.SpanStub
				count map[string]int
			)
			testutil.Until(t, testcluster.Timeout, "every span of the append's trace", func() (bool, string) {
				spans, count = traceSpans(exp.GetSpans(), root.SpanContext().TraceID())
				var missing []string
				for _, name := range want {
					if _, ok := spans[name]; !ok {
						missing = append(missing, name)
					}
				}
				return len(missing) == 0, fmt.Sprintf("missing %v of %v", missing, want)
			})

			for _, name := range want {
				if count[name] != 1 {
					t.Errorf("%d spans named %s in the trace, want 1", count[name], name)
				}
			}
			// The follower's spans are local children; the leader's
			// proposal is the child of a parent it received over the
			// peer service.
			links := []struct {
				child, parent string
				kind          trace.SpanKind
				remote        bool
			}{
				{tc.handler, "app", trace.SpanKindServer, true},
				{"node.forward", tc.handler, trace.SpanKindClient, false},
				{"raft.propose", "node.forward", trace.SpanKindServer, true},
				{"raft.commit", "raft.propose", trace.SpanKindInternal, false},
				{"fsm.apply", "raft.propose", trace.SpanKindInternal, false},
				{"reply", tc.handler, trace.SpanKindInternal, false},
			}
			for _, l := range links {
				s := spans[l.child]
				if got, want := s.Parent.SpanID(), spans[l.parent].SpanContext.SpanID(); got != want {
					t.Errorf("%s: parent span %s, want %s's %s", l.child, got, l.parent, want)
				}
				if s.Parent.IsRemote() != l.remote {
					t.Errorf("%s: parent remote %v, want %v", l.child, s.Parent.IsRemote(), l.remote)
				}
				if s.SpanKind != l.kind {
					t.Errorf("%s: kind %v, want %v", l.child, s.SpanKind, l.kind)
				}
			}
			commit, apply := spans["raft.commit"], spans["fsm.apply"]
			if commit.StartTime.After(commit.EndTime) || !commit.EndTime.Equal(apply.StartTime) || apply.StartTime.After(apply.EndTime) {
				t.Errorf("commit %v..%v then apply %v..%v: want apply to start when the commit ends", commit.StartTime, commit.EndTime, apply.StartTime, apply.EndTime)
			}
			if ns := attr(spans[tc.handler], "skald.namespace"); ns != "traced" {
				t.Errorf("%s: skald.namespace %q, want traced (attributes %v, status %v)", tc.handler, ns, spans[tc.handler].Attributes, spans[tc.handler].Status)
			}
			if leaderAddr := attr(spans["node.forward"], "skald.leader"); leaderAddr != leader.RaftAddr() && leaderAddr != leader.Proxy.Addr() {
				t.Errorf("node.forward: skald.leader %q, want the leader's cluster address", leaderAddr)
			}
		})
	}
}

// traceSpans returns the spans of trace id by name, and how many of each
// name it holds.
func traceSpans(all tracetest.SpanStubs, id trace.TraceID) (map[string]tracetest.SpanStub, map[string]int) {
	out, count := map[string]tracetest.SpanStub{}, map[string]int{}
	for _, s := range all {
		if s.SpanContext.TraceID() != id {
			continue
		}
		out[s.Name] = s
		count[s.Name]++
	}
	return out, count
}

func attr(s tracetest.SpanStub, key string) string {
	i := slices.IndexFunc(s.Attributes, func(kv attribute.KeyValue) bool { return string(kv.Key) == key })
	if i < 0 {
		return ""
	}
	return s.Attributes[i].Value.Emit()
}
