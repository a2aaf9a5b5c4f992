package kurrentdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics count the calls of this protocol by method and code. The
// method label is a served method's procedure without its leading
// slash, or "unserved" for any other path, so the label set is bounded.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// unservedMethod labels calls of paths not served.
const unservedMethod = "unserved"

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "kurrentdb", Name: "requests_total",
			Help: "Calls of KurrentDB's client protocol, by method and gRPC code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "skald", Subsystem: "kurrentdb", Name: "duration_seconds",
			Help:    "Latency of calls of KurrentDB's client protocol (a stream until it ends), by method and gRPC code.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"method", "code"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("kurrentdb: register metrics: %w", err)
		}
	}
	return m, nil
}

// observe counts one call of procedure that started at start and ended
// with err.
func (m *metrics) observe(procedure string, start time.Time, err error) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	method := strings.TrimPrefix(procedure, "/")
	m.requests.WithLabelValues(method, code).Inc()
	m.latency.WithLabelValues(method, code).Observe(time.Since(start).Seconds())
}

// WrapUnary implements connect.Interceptor.
func (m *metrics) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		resp, err := next(ctx, req)
		m.observe(req.Spec().Procedure, start, err)
		return resp, err
	}
}

// WrapStreamingClient implements connect.Interceptor (servers only).
func (m *metrics) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (m *metrics) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		m.observe(conn.Spec().Procedure, start, err)
		return err
	}
}
