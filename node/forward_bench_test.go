package node

import (
	"context"
	"fmt"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkClusterAppendForwarded measures single-message appends given
// to a follower of a 3-node in-process cluster (real Raft over loopback
// TCP, the mutual-TLS peer service, Pebble on disk), which forwards them
// to the leader, at 1 and 16 concurrent writers: the whole replicated
// write path of a request that reached a follower, tracing off.
//
//	go test -run '^$' -bench ClusterAppendForwarded -count 6 ./node
func BenchmarkClusterAppendForwarded(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			c := newCluster(b, 3, func(cfg *Config) { cfg.Timing = ProductionTiming })
			createNamespace(b, c.Leader().Node, "bench")
			f := c.Followers()[0].Node
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			for w := range writers {
				n := b.N / writers
				if w < b.N%writers {
					n++
				}
				wg.Go(func() {
					for i := range n {
						if _, err := appendOne(context.Background(), f, "bench", fmt.Sprintf("acct-%d", (w*7919+i)%1000), ""); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// BenchmarkClusterAppendForwardedTraced is BenchmarkClusterAppendForwarded
// with tracing on (every node's spans to a batching provider whose
// exporter discards them), each append under a root span as an API
// handler's would be: what tracing costs when it is on.
//
//	go test -run '^$' -bench ClusterAppendForwardedTraced -count 6 ./node
func BenchmarkClusterAppendForwardedTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	root := tp.Tracer("bench")
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			c := newCluster(b, 3, func(cfg *Config) { cfg.Timing, cfg.TracerProvider = ProductionTiming, tp })
			createNamespace(b, c.Leader().Node, "bench")
			f := c.Followers()[0].Node
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			for w := range writers {
				n := b.N / writers
				if w < b.N%writers {
					n++
				}
				wg.Go(func() {
					for i := range n {
						ctx, span := root.Start(context.Background(), "append")
						_, err := appendOne(ctx, f, "bench", fmt.Sprintf("acct-%d", (w*7919+i)%1000), "")
						span.End()
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
