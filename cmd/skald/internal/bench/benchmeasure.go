package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Measurement: run the ops for the duration, then latency percentiles
// and the per-second timeline.

// measure runs every op in a loop for the duration, with a progress line
// each second.
func (c *benchConfig) measure(ctx context.Context, ops []op, stderr io.Writer) (*Result, error) {
	// Calls run without the run's deadline (a deadline travels to the
	// server, which would fail the last calls); the loop stops on a flag.
	// A call still retrying then (a cluster client waiting for a leader)
	// is cancelled benchGrace later.
	var stop atomic.Bool
	timer := time.AfterFunc(c.duration, func() { stop.Store(true) })
	defer timer.Stop()
	context.AfterFunc(ctx, func() { stop.Store(true) })
	callCtx, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCalls()
	grace := time.AfterFunc(c.duration+benchGrace, cancelCalls)
	defer grace.Stop()
	var (
		nops, nmsgs, nerr atomic.Int64
		wg                sync.WaitGroup
		lat               = make([][]sample, len(ops))
		errAt             = make([][]time.Duration, len(ops))
		firstErr          atomic.Value
	)
	stopCPU := c.cpu.start(ctx)
	start := time.Now()
	for w, o := range ops {
		wg.Add(1)
		go func(w int, o op) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			for !stop.Load() {
				t := time.Now()
				n, err := o(callCtx, r)
				if err != nil {
					nerr.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					errAt[w] = append(errAt[w], time.Since(start))
					continue
				}
				lat[w] = append(lat[w], sample{at: time.Since(start), d: time.Since(t)})
				nops.Add(1)
				nmsgs.Add(int64(n))
			}
		}(w, o)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	prog := newProgress(stderr)
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var last int64
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				n := nops.Load()
				prog.printf("%5.0fs  %8d ops/s  %8d ops  %d errors   ", time.Since(start).Seconds(), n-last, n, nerr.Load())
				last = n
			}
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	cpuS, cpuOK := stopCPU()
	close(done)
	<-stopped
	prog.done()
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(stderr, "first error: %s\n", e)
	}
	res := c.result(slices.Concat(lat...), slices.Concat(errAt...), nops.Load(), nmsgs.Load(), nerr.Load(), elapsed)
	res.Slowest = slowest(start, lat, c.callerNode, benchSlowest)
	res.setCPU(cpuS, cpuOK)
	return res, nil
}

// benchSlowest is how many of a run's slowest calls its result lists.
const benchSlowest = 10

// slowCall is one of a run's slowest calls: when it was sent (UTC, to
// set beside the servers' logs), how long it took, and which caller sent
// it to which node.
type slowCall struct {
	SentAt string  `json:"sent_at"`
	MS     float64 `json:"ms"`
	Caller int     `json:"caller"`
	Node   string  `json:"node,omitempty"`
}

// slowest returns the n slowest of the callers' samples (lat[w] is caller
// w's), slowest first; node names the node a caller calls ("" when the
// client picks).
func slowest(start time.Time, lat [][]sample, node func(int) string, n int) []slowCall {
	type call struct {
		w int
		s sample
	}
	var all []call
	for w, ss := range lat {
		for _, s := range ss {
			all = append(all, call{w, s})
		}
	}
	slices.SortFunc(all, func(a, b call) int { return cmp.Compare(b.s.d, a.s.d) })
	out := make([]slowCall, 0, min(n, len(all)))
	for _, c := range all[:min(n, len(all))] {
		sent := start.Add(c.s.at - c.s.d).UTC()
		out = append(out, slowCall{SentAt: sent.Format("15:04:05.000"), MS: float64(c.s.d) / 1e6, Caller: c.w, Node: node(c.w)})
	}
	return out
}

// callerNode is the node caller i calls: pinned targets take turns
// (benchClients.of); one cluster client picks for itself.
func (c *benchConfig) callerNode(i int) string {
	if c.target == "cluster" || len(c.addrs) == 0 {
		return ""
	}
	return c.addrs[i%len(c.addrs)]
}

func (c *benchConfig) result(samples []sample, errAt []time.Duration, ops, msgs, errs int64, elapsed time.Duration) *Result {
	all := make([]time.Duration, len(samples))
	for i, s := range samples {
		all[i] = s.d
	}
	slices.Sort(all)
	pct := func(p float64) float64 { return percentileMS(all, p) }
	s := elapsed.Seconds()
	return &Result{
		Workload: c.workload, Concurrency: c.concurrency, DurationS: s, Ops: ops, Messages: msgs, Errors: errs,
		OpsPerSec: float64(ops) / s, MessagesPerSec: float64(msgs) / s,
		LatencyMS: map[string]float64{"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "p999": pct(0.999), "max": pct(1)},
		Timeline:  timeline(samples, errAt),
	}
}
