package rpc

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/testutil"
)

// With a TracerProvider, every protocol still works through the tracing
// wrapper (unary and streaming, gRPC trailers included), and each call
// leaves a server span named by its procedure, with the caller's
// namespace, the outcome's code and a reply span under it; paths that are
// not API calls leave none, and an unknown method under /skald.v1. is one
// bounded name.
func TestTracedHandler(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	opts := defaultOptions
	opts.TracerProvider = tp
	s := singleWith(t, opts)

	// spans returns the spans of the calls made by do, by name.
	spans := func(t *testing.T, want int, do func()) map[string][]tracetest.SpanStub {
		t.Helper()
		exp.Reset()
		do()
		byName := map[string][]tracetest.SpanStub{}
		testutil.Until(t, waitTimeout, "the calls' spans", func() (bool, string) {
			byName = map[string][]tracetest.SpanStub{}
			for _, sp := range exp.GetSpans() {
				byName[sp.Name] = append(byName[sp.Name], sp)
			}
			return len(exp.GetSpans()) >= want, ""
		})
		return byName
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := newClients(s, p, adminToken)
			got := spans(t, 6, func() {
				if _, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "traced-1", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}})); err != nil {
					t.Fatalf("append: %v", err)
				}
				_, err := c.events.ReadStream(ctxT(t), connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: ""}))
				if connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Fatalf("read of no stream: %v, want InvalidArgument", err)
				}
				ctx, cancel := context.WithCancel(ctxT(t))
				defer cancel()
				st, err := c.events.Subscribe(ctx, connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Stream{Stream: "traced-1"}}))
				if err != nil {
					t.Fatalf("subscribe: %v", err)
				}
				if !st.Receive() {
					t.Fatalf("subscribe delivered nothing: %v", st.Err())
				}
				cancel()
				st.Close()
			})
			append_ := got["skald.v1.EventStore/Append"]
			if len(append_) != 1 || append_[0].Status.Code != codes.Unset || attrOf(append_[0], "skald.namespace") != "default" {
				t.Fatalf("Append spans %v: want one, ok, namespace default", summary(append_))
			}
			read := got["skald.v1.EventStore/ReadStream"]
			if len(read) != 1 || read[0].Status.Code != codes.Error || attrOf(read[0], "rpc.response.status_code") != "invalid_argument" {
				t.Fatalf("ReadStream spans %v: want one, failed invalid_argument", summary(read))
			}
			if len(got["skald.v1.EventStore/Subscribe"]) != 1 {
				t.Fatalf("Subscribe spans: %d, want 1", len(got["skald.v1.EventStore/Subscribe"]))
			}
			replies := map[string]bool{}
			for _, r := range got["reply"] {
				replies[r.Parent.SpanID().String()] = true
			}
			for _, name := range []string{"skald.v1.EventStore/Append", "skald.v1.EventStore/ReadStream", "skald.v1.EventStore/Subscribe"} {
				if !replies[got[name][0].SpanContext.SpanID().String()] {
					t.Errorf("%s has no reply span", name)
				}
			}
		})
	}

	t.Run("not traced and unknown", func(t *testing.T) {
		got := spans(t, 2, func() {
			for _, path := range []string{"/metrics", "/healthz", "/readyz", "/ui/", "/skald.v1.EventStore/NoSuchMethod"} {
				req, _ := http.NewRequest(http.MethodGet, "http://"+s.addr+path, nil)
				if strings.HasPrefix(path, "/skald.v1.") {
					req.Method = http.MethodPost
					req.Header.Set("Content-Type", "application/proto")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
		})
		if len(got) != 2 || len(got["skald.v1/unknown"]) != 1 || len(got["reply"]) != 1 {
			t.Fatalf("spans %v: want only skald.v1/unknown and its reply", names(got))
		}
	})
}

func attrOf(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

func names(m map[string][]tracetest.SpanStub) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// summary is each span's status and attributes.
func summary(spans []tracetest.SpanStub) []string {
	var out []string
	for _, s := range spans {
		out = append(out, fmt.Sprintf("%s %v %v", s.Name, s.Status.Code, s.Attributes))
	}
	return out
}
