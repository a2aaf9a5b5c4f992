package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/skalddb/skald/internal/buildinfo"
)

// checkOTLPEndpoint refuses an --otlp-endpoint that is not an http or
// https URL with a host ("" is tracing off).
func checkOTLPEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--otlp-endpoint %q: want an http:// or https:// URL of an OTLP/HTTP collector (e.g. http://127.0.0.1:4318)", endpoint)
	}
	return nil
}

// newTracerProvider exports the node's spans to the OTLP/HTTP collector
// at endpoint (traces go to its /v1/traces unless the URL names a path),
// sampling root spans at ratio and following a caller's sampling
// decision otherwise. The exporter also reads the standard
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, certificate). Nothing
// is global: the provider goes to the node and the API handler only.
func newTracerProvider(ctx context.Context, endpoint string, ratio float64, nodeName string, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
	if u, _ := url.Parse(endpoint); u.Path == "" || u.Path == "/" {
		opts = append(opts, otlptracehttp.WithURLPath("/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("--otlp-endpoint: %w", err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", "skald"),
		attribute.String("service.version", buildinfo.Version),
		attribute.String("service.instance.id", nodeName),
	)
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(&loggedExporter{SpanExporter: exp, log: log, endpoint: endpoint}),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	), nil
}

// loggedExporter logs failed exports itself, at most once a minute,
// rather than leave them to OpenTelemetry's global error handler.
type loggedExporter struct {
	sdktrace.SpanExporter
	log      *slog.Logger
	endpoint string

	mu      sync.Mutex
	last    time.Time
	dropped int // failed exports not logged since last
}

func (e *loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if time.Since(e.last) < time.Minute {
		e.dropped++
		return nil
	}
	e.log.Warn("exporting spans failed: they are dropped", "otlp-endpoint", e.endpoint, "spans", len(spans), "failures-since-last-report", e.dropped, "err", err)
	e.last, e.dropped = time.Now(), 0
	return nil
}
