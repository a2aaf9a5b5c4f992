package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/skalddb/skald/jepsen/internal/client"
	"github.com/skalddb/skald/jepsen/internal/history"
)

// The consumers workload: the append workload's writers, plus a pinned
// subscription group over the "acct" category whose consumers (one per
// node to start with) receive every delivery, record it, and ack it
// through a node. A consumer whose stream ends reattaches through the
// next node. After the traffic and the final reads, Drain keeps them
// consuming until every message of the category in the final log is
// acknowledged (or the time is up), so the checker can demand it.

// Group and GroupCategory name the workload's subscription group.
const (
	Group         = "jepsen-g"
	GroupCategory = "acct"
)

// consumerProcess is the first process id of consumers' operations; each
// consumer gets a block of 1<<16 ids (a new one after an ack whose
// outcome is unknown).
const consumerProcess = 1 << 24

// Consumers runs the group's consumers.
type Consumers struct {
	c      *client.Client
	nodes  []string
	seed   uint64
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	acked  map[string]bool // ids acknowledged ok, or maybe (the ack's outcome unknown)
}

// StartConsumers creates the group (retrying while the cluster settles)
// and starts n consumers.
func StartConsumers(ctx context.Context, c *client.Client, nodes []string, n int, seed uint64) (*Consumers, error) {
	var err error
	for attempt := 0; attempt < 60; attempt++ {
		if err = c.CreateGroup(ctx, nodes[attempt%len(nodes)], Group, GroupCategory); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create group: %w", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cs := &Consumers{c: c, nodes: nodes, seed: seed, cancel: cancel, acked: map[string]bool{}}
	for i := range n {
		cs.wg.Add(1)
		go cs.run(cctx, i)
	}
	return cs, nil
}

func (cs *Consumers) run(ctx context.Context, i int) {
	defer cs.wg.Done()
	pid := consumerProcess + i<<16
	process := func() int { return pid }
	name := fmt.Sprintf("c%d", i)
	rng := rand.New(rand.NewPCG(cs.seed, uint64(i)))
	for attempt := 0; ctx.Err() == nil; attempt++ {
		node := cs.nodes[(i+attempt)%len(cs.nodes)]
		cs.c.Consume(ctx, process, node, Group, name, func(d client.Delivery) {
			// Work on it a while (10-50 ms: the group runs with a backlog,
			// so deliveries are in flight and messages wait when faults
			// strike), then ack through the next node: acks cross the peer service too.
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(10+rng.IntN(41)) * time.Millisecond):
			}
			op := cs.c.Ack(ctx, pid, cs.nodes[(i+attempt+1)%len(cs.nodes)], Group, d.ID)
			switch op.Type {
			case history.OK:
				cs.settled(d.ID)
			case history.Info:
				// Maybe settled: it is delivered again or never; Drain
				// cannot wait for more. Retire the process.
				cs.settled(d.ID)
				pid++
			}
		})
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (cs *Consumers) settled(id string) {
	cs.mu.Lock()
	cs.acked[id] = true
	cs.mu.Unlock()
}

// Drain waits until every id of want was acknowledged (or maybe), or timeout, then
// stops the consumers. It returns how many were never acknowledged.
func (cs *Consumers) Drain(ctx context.Context, want []string, timeout time.Duration) int {
	defer cs.Stop()
	deadline := time.Now().Add(timeout)
	for {
		cs.mu.Lock()
		missing := 0
		for _, id := range want {
			if !cs.acked[id] {
				missing++
			}
		}
		cs.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return missing
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop ends every consumer and waits for them.
func (cs *Consumers) Stop() {
	cs.cancel()
	cs.wg.Wait()
}
