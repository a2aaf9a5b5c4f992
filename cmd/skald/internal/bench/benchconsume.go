package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// consume measures a persistent subscription: appends at --rate carry
// their send time; one group (round robin, started at the end) has
// --concurrency consumers spread over the targets, each acking every
// delivery. The latency is from the append's send to its ack's answer
// (delivered and acknowledged, end to end); the rate is acknowledged
// messages per second.
func (c *benchConfig) consume(ctx context.Context, clients benchClients, stderr io.Writer) (*Result, error) {
	writer := clients.of(0)
	group := c.run + "-g"
	if _, err := writer.CreateGroup(ctx, client.GroupSpec{Name: group, Category: c.run, StartAtEnd: true,
		Settings: client.GroupSettings{MaxInFlight: 100_000, MaxInFlightPerConsumer: 1000, CheckpointAfter: 1000}}); err != nil {
		return nil, fmt.Errorf("create group: %w", command.APIError(err))
	}
	defer writer.DeleteGroup(context.WithoutCancel(ctx), group)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		lat     []sample
		start   = time.Now()
		acked   atomic.Int64
		ackErrs atomic.Int64
		redeliv atomic.Int64
		done    sync.WaitGroup
	)
	for i := range c.concurrency {
		cl := clients.of(i)
		done.Add(1)
		go func() {
			defer done.Done()
			for d, err := range cl.Consume(cctx, group, fmt.Sprintf("bench-%d", i)) {
				if err != nil {
					return
				}
				if d.Attempt > 1 {
					redeliv.Add(1)
				}
				if err := cl.Ack(cctx, group, d.ID); err != nil {
					ackErrs.Add(1)
					continue
				}
				var p struct{ T int64 }
				if json.Unmarshal(d.Data, &p) == nil && p.T > 0 {
					mu.Lock()
					lat = append(lat, sample{at: time.Since(start), d: time.Since(time.Unix(0, p.T))})
					mu.Unlock()
					acked.Add(1)
				}
			}
		}()
	}
	// Every consumer attached (the leader's live state says) before the
	// clock starts.
	for wait := time.Now().Add(30 * time.Second); ; {
		g, err := writer.GetGroup(ctx, group)
		if err == nil && int(g.State.Consumers) == c.concurrency {
			break
		}
		if time.Now().After(wait) {
			return nil, fmt.Errorf("consume: %d consumers did not attach within 30 s (%v)", c.concurrency, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	start = time.Now()
	mu.Unlock()
	stopCPU := c.cpu.start(ctx)
	sent, errs := c.paceTicks(ctx, writer, 64)
	elapsed := time.Since(start)
	deadline := time.Now().Add(10 * time.Second)
	for acked.Load() < sent-errs && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cpuS, cpuOK := stopCPU()
	cancel()
	done.Wait()
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(stderr, "sent %d appends at %d/s; %d delivered and acknowledged by %d consumers (%d redelivered, %d ack errors)\n",
		sent, c.rate, acked.Load(), c.concurrency, redeliv.Load(), ackErrs.Load())
	res := c.result(lat, nil, int64(len(lat)), int64(len(lat)), errs, elapsed)
	res.setCPU(cpuS, cpuOK)
	return res, nil
}
