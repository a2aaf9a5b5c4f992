package node

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// BenchmarkClusterAppend measures single-message appends on a 3-node
// in-process cluster (real Raft over loopback TCP, raft-boltdb with fsync,
// Pebble on disk) at 1, 16 and 64 concurrent writers through the leader,
// reporting throughput and p50/p99 latency.
//
//	go test -run '^$' -bench ClusterAppend -benchtime 5s ./node
func BenchmarkClusterAppend(b *testing.B) {
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			c := newCluster(b, 3, func(cfg *Config) { cfg.Timing = ProductionTiming })
			l := c.Leader()
			createNamespace(b, l.Node, "bench")
			lat := make([][]time.Duration, writers)
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := 0; w < writers; w++ {
				n := b.N / writers
				if w < b.N%writers {
					n++
				}
				wg.Add(1)
				go func(w, n int) {
					defer wg.Done()
					for i := 0; i < n; i++ {
						start := time.Now()
						_, err := appendOne(context.Background(), l.Node, "bench", fmt.Sprintf("acct-%d", (w*7919+i)%1000), "")
						if err != nil {
							b.Error(err)
							return
						}
						lat[w] = append(lat[w], time.Since(start))
					}
				}(w, n)
			}
			wg.Wait()
			b.StopTimer()
			var all []time.Duration
			for _, l := range lat {
				all = append(all, l...)
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			pct := func(p float64) float64 {
				if len(all) == 0 {
					return 0
				}
				return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
			}
			b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "appends/s")
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
