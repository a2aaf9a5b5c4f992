package node

import (
	"context"
	"sync"
	"time"

	"github.com/skalddb/skald/node/nodeapi"
)

// indexBatcher coalesces concurrent read-index requests, as etcd batches
// its ReadIndex calls: one fetch serves every request that arrived before
// the fetch began, so a burst of linearizable reads costs one leader
// confirmation (or one call to the leader) instead of one each.
//
// Invariant: a request is only ever answered by a fetch that started
// after the request arrived. That is what makes a shared answer as good as
// a private one: the index the fetch returns is at least the commit index
// at the request's arrival.
type indexBatcher struct {
	life    context.Context // the node's: fetches end and callers stop waiting when it closes
	fetch   func(context.Context) (uint64, error)
	timeout time.Duration // bounds one fetch; it serves many callers, so no caller's context
	onFetch func(requests int)

	mu      sync.Mutex
	next    *indexRound // requests waiting for a fetch that has not started
	running bool        // a goroutine is running rounds
}

// indexRound is one fetch and the requests it answers.
type indexRound struct {
	done    chan struct{}
	waiters int // requests it answers
	index   uint64
	err     error
}

func newIndexBatcher(life context.Context, fetch func(context.Context) (uint64, error), timeout time.Duration, onFetch func(requests int)) *indexBatcher {
	return &indexBatcher{life: life, fetch: fetch, timeout: timeout, onFetch: onFetch}
}

// get returns the result of a fetch that started after the call.
func (b *indexBatcher) get(ctx context.Context) (uint64, error) {
	b.mu.Lock()
	r := b.next
	if r == nil {
		r = &indexRound{done: make(chan struct{})}
		b.next = r
	}
	r.waiters++
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		if r.err != nil && b.life.Err() != nil {
			return 0, nodeapi.ErrShutdown
		}
		return r.index, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-b.life.Done():
		return 0, nodeapi.ErrShutdown
	}
}

// run fetches for one waiting round after another until none waits.
func (b *indexBatcher) run() {
	for {
		b.mu.Lock()
		r := b.next
		b.next = nil
		if r == nil {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.onFetch(r.waiters)
		ctx, cancel := context.WithTimeout(b.life, b.timeout)
		r.index, r.err = b.fetch(ctx)
		cancel()
		close(r.done)
	}
}
