package kurrentdb

import (
	"context"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracing (Options.TracerProvider; off by default, and then nothing here
// is installed) is the API port's (rpc.Traced): a server span per call,
// under the caller's W3C traceparent, named by its procedure
// ("event_store.client.streams.Streams/Append"), or "kurrentdb/unserved"
// for any other path, so a caller cannot mint span names. The span
// carries the caller's namespace and the outcome's gRPC code, refusals
// before the body included, never a credential, a stream name or data;
// the node's spans (forward, proposal, commit, apply) nest under it.

// unservedSpan names the span of a call of a method not served.
const unservedSpan = "kurrentdb/unserved"

// spanName is the rpc.SpanNamer of this protocol: every call is traced.
func (s *Server) spanName(r *http.Request) (name, system string, ok bool) {
	if _, served := s.served[r.URL.Path]; served {
		return strings.TrimPrefix(r.URL.Path, "/"), "grpc", true
	}
	return unservedSpan, "grpc", true
}

// recordOutcome records the caller's namespace and err's code on ctx's
// span; a no-op when the call is not traced.
func recordOutcome(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if c, ok := callerFrom(ctx); ok && c.Namespace() != "" {
		span.SetAttributes(attribute.String("skald.namespace", c.Namespace()))
	}
	if err != nil {
		code := connect.CodeOf(err)
		span.SetAttributes(attribute.String("rpc.response.status_code", code.String()))
		span.SetStatus(codes.Error, code.String())
	}
}

// spanOutcome is the interceptor that records each call's outcome on its
// span (recordOutcome). Installed only with tracing on.
type spanOutcome struct{}

// WrapUnary implements connect.Interceptor.
func (spanOutcome) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		recordOutcome(ctx, err)
		return resp, err
	}
}

// WrapStreamingClient implements connect.Interceptor (servers only).
func (spanOutcome) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (spanOutcome) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		err := next(ctx, conn)
		recordOutcome(ctx, err)
		return err
	}
}
