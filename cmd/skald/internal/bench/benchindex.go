package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// bench --index: one user-defined index on the category the run writes
// (a string field, the data's "p"), created before the measured window,
// and every target node's lag on it sampled at LOCAL while the writes
// run. A sample is the node's IndexStatus: lag, the age of the oldest
// event its index does not hold yet (0 when it holds every one), and
// lag_events, the events between its checkpoint and the namespace's end.

// benchIndexName is the index bench --index creates.
const benchIndexName = "bench-lag"

// benchIndexEvery is how often each node's lag is sampled.
const benchIndexEvery = 100 * time.Millisecond

// indexWorkloads are the workloads that write into the run's category.
var indexWorkloads = []string{"append", "evdb-append", "append-batch", "mixed"}

// createBenchIndex declares the run's index.
func (c *benchConfig) createBenchIndex(ctx context.Context, cl *client.Client) error {
	_, err := cl.CreateIndex(ctx, "", &skaldv1.IndexDefinition{Name: benchIndexName, Version: 1, Category: c.run, Kind: skaldv1.IndexKind_INDEX_KIND_EVENT,
		Fields: []*skaldv1.IndexField{{Source: skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, Pointer: "/p", Type: skaldv1.IndexFieldType_INDEX_FIELD_TYPE_STRING}}})
	if err != nil {
		return fmt.Errorf("--index: create index %s: %w", benchIndexName, command.APIError(err))
	}
	return nil
}

// lagSampler samples the index lag of every target node.
type lagSampler struct {
	mu        sync.Mutex
	lags      []time.Duration
	maxEvents int64
	errs      int
	stop      context.CancelFunc
	wg        sync.WaitGroup
}

// sampleIndexLag starts one sampler per client (each pinned to a node,
// or the cluster client).
func sampleIndexLag(ctx context.Context, clients benchClients) *lagSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &lagSampler{stop: cancel}
	for _, cl := range clients {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			tick := time.NewTicker(benchIndexEvery)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				cctx, ccancel := context.WithTimeout(ctx, time.Second)
				info, err := cl.IndexInfo(cctx, "", benchIndexName, client.WithLocal(0))
				ccancel()
				s.mu.Lock()
				if err != nil || info.GetStatus() == nil {
					if ctx.Err() == nil {
						s.errs++
					}
				} else {
					st := info.GetStatus()
					s.lags = append(s.lags, st.GetLag().AsDuration())
					s.maxEvents = max(s.maxEvents, st.GetLagEvents())
				}
				s.mu.Unlock()
			}
		}()
	}
	return s
}

// finish stops the samplers and puts what they saw into res.
func (s *lagSampler) finish(res *Result, stderr io.Writer) {
	s.stop()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	res.IndexLagSamples, res.IndexLagEventsMax = len(s.lags), s.maxEvents
	if len(s.lags) == 0 {
		fmt.Fprintf(stderr, "index lag: no sample (%d failed)\n", s.errs)
		return
	}
	slices.Sort(s.lags)
	at := func(q float64) float64 {
		return float64(s.lags[min(len(s.lags)-1, int(q*float64(len(s.lags))))]) / 1e6
	}
	res.IndexLagMS = map[string]float64{"p50": at(0.5), "p99": at(0.99), "max": at(1)}
	fmt.Fprintf(stderr, "index lag (LOCAL, %d samples every %v per node, %d failed): p50 %.1f ms  p99 %.1f ms  max %.1f ms; at most %d events behind\n",
		len(s.lags), benchIndexEvery, s.errs, res.IndexLagMS["p50"], res.IndexLagMS["p99"], res.IndexLagMS["max"], s.maxEvents)
}
