package client

import (
	"context"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
)

// traceparent sends the caller's trace context: when a call's context
// carries an OpenTelemetry span, its W3C traceparent (and tracestate)
// header, so the server's spans join the caller's trace. It reads only
// the context (no global propagator, no SDK): without a span it adds
// nothing.
type traceparent struct{}

// set writes the trace context of ctx, if any, with set.
func (traceparent) set(ctx context.Context, set func(key, value string)) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	set("traceparent", "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-"+sc.TraceFlags().String())
	if ts := sc.TraceState().String(); ts != "" {
		set("tracestate", ts)
	}
}

func (t traceparent) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		t.set(ctx, req.Header().Set)
		return next(ctx, req)
	}
}

func (t traceparent) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		t.set(ctx, conn.RequestHeader().Set)
		return conn
	}
}

func (traceparent) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
