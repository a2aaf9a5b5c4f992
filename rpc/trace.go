package rpc

import (
	"context"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
)

// Tracing (Options.TracerProvider; off by default, and then nothing here
// is installed). Every call of the skald.v1 services and of the EventoDB
// API (/rpc, /import, /subscribe) gets a server span, named by its
// procedure ("skald.v1.EventStore/Append", "eventodb/stream.write"),
// whose parent is the caller's W3C traceparent header when it sends one,
// and a "reply" span from the first byte of the reply to the handler's
// end. The node (node/trace.go) adds the forward hop, the proposal, its
// commit and apply under the server span. Other paths (/metrics,
// /healthz, /readyz, the console, reflection, health) are not traced: a
// scraper would fill the collector with them.
//
// A client's trace context is all that is taken from it: W3C trace
// context only, no baggage. Spans carry the procedure, the caller's
// namespace and the outcome, never a token, a stream name or data.

// tracerName is the instrumentation scope of the API's spans.
const tracerName = "github.com/skalddb/skald/rpc"

// tracing wraps the API handler with server spans (see above).
type tracing struct {
	tracer     trace.Tracer
	propagator propagation.TraceContext
	procedures map[string]string // Connect path -> span name, every skald.v1 method
	name       SpanNamer
	next       http.Handler
}

// SpanNamer returns the span name of a request and its rpc.system
// attribute, and false for a request not traced. Names must come from a
// bounded set, so a caller cannot mint span names.
type SpanNamer func(r *http.Request) (name, system string, ok bool)

func newTracing(tp trace.TracerProvider, next http.Handler) *tracing {
	t := &tracing{tracer: tp.Tracer(tracerName), procedures: connectProcedures(), next: next}
	t.name = t.spanName
	return t
}

// Traced wraps next, the handler of another wire protocol served by this
// process (rpc/kurrentdb), with the API's server spans: one per request
// that name names, under the caller's W3C traceparent, and a "reply"
// span from the first byte of the reply. Calls it makes through Local
// carry the span, so the node's spans (forward, proposal, commit, apply)
// nest under it.
func Traced(tp trace.TracerProvider, name SpanNamer, next http.Handler) http.Handler {
	return &tracing{tracer: tp.Tracer(tracerName), name: name, next: next}
}

// connectProcedures returns the span name of every skald.v1 procedure,
// by path: a bounded set, so a caller cannot mint span names.
func connectProcedures() map[string]string {
	out := map[string]string{}
	for _, svc := range []string{skaldv1connect.EventStoreName, skaldv1connect.NamespacesName, skaldv1connect.ClusterName, skaldv1connect.SubscriptionsName,
		skaldv1connect.IndexesName, skaldv1connect.CredentialsName} {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		if err != nil {
			continue
		}
		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			name := svc + "/" + string(methods.Get(i).Name())
			out["/"+name] = name
		}
	}
	return out
}

// spanName returns the span name of a request, and false for paths that
// are not traced.
func (t *tracing) spanName(r *http.Request) (name, system string, ok bool) {
	p := r.URL.Path
	switch {
	case p == "/rpc":
		return evdbRefused, "eventodb", true // renamed to its method once known
	case p == "/import":
		return evdbPrefix + "import", "eventodb", true
	case p == "/subscribe":
		return evdbPrefix + "subscribe", "eventodb", true
	case strings.HasPrefix(p, "/skald.v1."):
		if name, ok := t.procedures[p]; ok {
			return name, "connect_rpc", true
		}
		return "skald.v1/unknown", "connect_rpc", true
	}
	return "", "", false
}

func (t *tracing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, system, ok := t.name(r)
	if !ok {
		t.next.ServeHTTP(w, r)
		return
	}
	ctx := t.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("rpc.system", system), attribute.String("http.request.method", r.Method)))
	defer span.End()
	rw := &replyWriter{ResponseWriter: w, ctx: ctx, tracer: t.tracer}
	defer rw.end()
	t.next.ServeHTTP(rw, r.WithContext(ctx))
	if rw.status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", rw.status))
		if rw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rw.status))
		}
	}
}

// replyWriter times the reply: a "reply" span from its first byte (or
// header) to the end of the handler.
type replyWriter struct {
	http.ResponseWriter
	ctx    context.Context
	tracer trace.Tracer
	reply  trace.Span // nil until the reply begins
	status int
}

func (w *replyWriter) begin() {
	if w.reply == nil {
		_, w.reply = w.tracer.Start(w.ctx, "reply")
	}
}

func (w *replyWriter) end() {
	if w.reply != nil {
		w.reply.End()
	}
}

func (w *replyWriter) WriteHeader(code int) {
	w.begin()
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *replyWriter) Write(b []byte) (int, error) {
	w.begin()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher for handlers that assert it.
func (w *replyWriter) Flush() {
	w.begin()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *replyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// spanOutcome is the interceptor that records a Connect call's namespace
// and error on its server span. Installed only with tracing on.
type spanOutcome struct{}

func (spanOutcome) record(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if ns := callerFrom(ctx).namespace; ns != "" {
		span.SetAttributes(attribute.String("skald.namespace", ns))
	}
	if err != nil {
		code := connect.CodeOf(err)
		span.SetAttributes(attribute.String("rpc.response.status_code", code.String()))
		span.SetStatus(codes.Error, code.String())
	}
}

func (s spanOutcome) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		s.record(ctx, err)
		return resp, err
	}
}

func (spanOutcome) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (s spanOutcome) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		err := next(ctx, conn)
		s.record(ctx, err)
		return err
	}
}

// evdbSpan names an EventoDB /rpc call's span by its method once known
// and records its namespace and outcome ("ok" or the EventoDB error
// code). A no-op on an untraced request.
func evdbSpan(ctx context.Context, procedure, namespace, code string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetName(procedure)
	if namespace != "" {
		span.SetAttributes(attribute.String("skald.namespace", namespace))
	}
	if code != "ok" {
		span.SetAttributes(attribute.String("eventodb.error_code", code))
		span.SetStatus(codes.Error, code)
	}
}
