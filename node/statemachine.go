package node

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node/nodeapi"
)

// stateMachine adapts fsm.Store for Raft. It tracks the applied index (the
// last entry whose effects reads can see) and, after every batch, wakes
// index waiters and the feed.
//
// INVARIANT: applied only grows, except on Restore, which sets it to the
// restored snapshot's index.
type stateMachine struct {
	before    func()    // test hook, nil in production
	onFailure func(any) // logs a storage failure inside apply
	store     *fsm.Store
	feed      *nodeapi.Feed
	metrics   *metrics

	applied atomic.Uint64
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when applied changes
}

func newStateMachine(store *fsm.Store, feed *nodeapi.Feed, m *metrics, start uint64) *stateMachine {
	sm := &stateMachine{store: store, feed: feed, metrics: m, changed: make(chan struct{})}
	sm.applied.Store(start)
	return sm
}

// ApplyBatch implements raft.BatchingFSM.
//
// The state machine panics on a storage error rather than skip an entry;
// onFailure logs what happened and what to do before the panic goes on
// and stops the process.
func (sm *stateMachine) ApplyBatch(logs []*raft.Log) []any {
	if sm.onFailure != nil {
		defer func() {
			if r := recover(); r != nil {
				sm.onFailure(r)
				panic(r)
			}
		}()
	}
	if sm.before != nil {
		sm.before()
	}
	out := sm.store.ApplyBatch(logs)
	sm.metrics.applyBatch.Observe(float64(len(logs)))
	sm.feed.Publish(out)
	sm.advance(logs[len(logs)-1].Index)
	return out
}

// Apply implements raft.FSM.
func (sm *stateMachine) Apply(l *raft.Log) any { return sm.ApplyBatch([]*raft.Log{l})[0] }

// Snapshot implements raft.FSM.
func (sm *stateMachine) Snapshot() (raft.FSMSnapshot, error) { return sm.store.Snapshot() }

// Restore implements raft.FSM: the whole state is replaced, so every
// subscriber's watch ends.
func (sm *stateMachine) Restore(rc io.ReadCloser) error {
	if err := sm.store.Restore(rc); err != nil {
		return err
	}
	floor, err := sm.store.Floor()
	if err != nil {
		return err
	}
	sm.feed.EndAll()
	sm.set(floor.Index)
	return nil
}

func (sm *stateMachine) advance(index uint64) {
	if index > sm.applied.Load() {
		sm.set(index)
	}
}

func (sm *stateMachine) set(index uint64) {
	sm.mu.Lock()
	sm.applied.Store(index)
	close(sm.changed)
	sm.changed = make(chan struct{})
	sm.mu.Unlock()
}

// appliedIndex returns the applied index.
func (sm *stateMachine) appliedIndex() uint64 { return sm.applied.Load() }

// wait returns a channel closed at the next change of the applied index,
// and the index now.
func (sm *stateMachine) wait() (<-chan struct{}, uint64) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.changed, sm.applied.Load()
}

// waitFor blocks until applied >= index or ctx ends.
func (sm *stateMachine) waitFor(ctx context.Context, index uint64) error {
	for {
		ch, applied := sm.wait()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
