package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// subscribe measures delivery latency: appends at --rate on the first node
// carry their send time; a subscriber on the last node measures arrival
// (with --target cluster, both go through the cluster client).
func (c *benchConfig) subscribe(ctx context.Context, clients benchClients, stderr io.Writer) (*Result, error) {
	writer, reader := clients.of(0), clients.of(len(c.addrs)-1)
	where := c.addrs[len(c.addrs)-1]
	if c.target == "cluster" {
		where = "the cluster client"
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		lat     []sample
		start   time.Time // when the appends began; set under mu
		subErr  error
		caught  = make(chan struct{})
		stopped = make(chan struct{})
	)
	sub := client.Subscription{Category: c.run, CaughtUp: func() { close(caught) }}
	go func() {
		defer close(stopped)
		for m, err := range reader.Subscribe(sctx, sub) {
			if err != nil {
				subErr = err
				return
			}
			var p struct{ T int64 }
			if json.Unmarshal(m.Data, &p) == nil {
				mu.Lock()
				lat = append(lat, sample{at: time.Since(start), d: time.Since(time.Unix(0, p.T))})
				mu.Unlock()
			}
		}
	}()
	select {
	case <-caught:
	case <-stopped:
		return nil, fmt.Errorf("subscribe: ended before caught up: %w", command.APIError(subErr))
	case <-time.After(30 * time.Second):
		return nil, errors.New("subscribe: not caught up within 30 s")
	}
	mu.Lock()
	start = time.Now()
	mu.Unlock()
	stopCPU := c.cpu.start(ctx)
	sent, errs := c.paceTicks(ctx, writer, c.concurrency)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := int64(len(lat))
		mu.Unlock()
		if n >= sent-errs || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cpuS, cpuOK := stopCPU()
	cancel()
	<-stopped
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(stderr, "sent %d appends at %d/s, %d delivered on %s\n", sent, c.rate, len(lat), where)
	res := c.result(lat, nil, int64(len(lat)), int64(len(lat)), errs, time.Since(start))
	res.setCPU(cpuS, cpuOK)
	return res, nil
}

// paceTicks appends one Tick message, its data the time it was sent
// ({"T": unix ns}), every 1/c.rate for c.duration, round robin over c's
// streams, with at most parallel appends in flight. It returns how many
// it sent and how many of those failed; the deliveries' latency is what
// the subscribe and consume workloads measure.
func (c *benchConfig) paceTicks(ctx context.Context, writer *client.Client, parallel int) (sent, failed int64) {
	interval := time.Second / time.Duration(max(c.rate, 1))
	var n, errs atomic.Int64
	wctx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for next := time.Now(); wctx.Err() == nil; next = next.Add(interval) {
		time.Sleep(time.Until(next))
		sem <- struct{}{}
		i := n.Add(1) - 1
		wg.Go(func() {
			defer func() { <-sem }()
			data := fmt.Appendf(nil, `{"T":%d}`, time.Now().UnixNano())
			if _, err := writer.Append(ctx, c.stream(int(i)), []client.NewMessage{{Type: "Tick", Data: data}}); err != nil {
				errs.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load(), errs.Load()
}
