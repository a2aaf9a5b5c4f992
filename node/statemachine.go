package node

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
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
	clock     *applyClock // nil unless tracing is on (trace.go)
	// onIndex, when set, is called with the namespace of every applied
	// index definition change, and of every indexed namespace after a
	// restore (the node starts its index loop). It must not block.
	// Set once the node is open, while Raft may be applying: atomic.
	onIndex atomic.Pointer[func(namespace string)]

	applied atomic.Uint64
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when applied changes

	// entries is ApplyBatch's buffer of converted entries, reused from
	// batch to batch. Raft calls the FSM from its one FSM goroutine.
	entries []fsm.Entry
}

func newStateMachine(store *fsm.Store, feed *nodeapi.Feed, m *metrics, start uint64) *stateMachine {
	sm := &stateMachine{store: store, feed: feed, metrics: m, changed: make(chan struct{})}
	sm.applied.Store(start)
	return sm
}

// ApplyBatch implements raft.BatchingFSM.
//
// A resource error (no file descriptor, no disk space) makes the store
// wait inside this call until the resource is free (fsm.Store.ApplyBatch;
// the node reports the stall meanwhile: StorageStall). Any other storage
// error panics rather than skip an entry; onFailure logs what happened and
// what to do before the panic goes on and stops the process. When the node
// shuts down during a wait (fsm.Store.Interrupt) the entries are not
// applied: each future is answered nodeapi.ErrUnknownOutcome (they are
// committed and apply on the next start), and the applied index, the feed
// and the durable floor stay where they were.
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
	var received time.Time
	if sm.clock != nil {
		received = time.Now()
	}
	entries := sm.entriesOf(logs)
	out := sm.store.ApplyBatch(entries)
	clear(entries) // hold no log's bytes until the next batch
	if sm.store.Interrupted() {
		for i := range out {
			out[i] = fmt.Errorf("%w: %w", nodeapi.ErrUnknownOutcome, fsm.ErrInterrupted)
		}
		return out
	}
	if sm.clock != nil {
		sm.clock.observe(logs, received, time.Now())
	}
	sm.metrics.applyBatch.Observe(float64(len(logs)))
	sm.feed.Publish(out)
	if on := sm.onIndex.Load(); on != nil {
		for _, r := range out {
			if r, _ := r.(*fsmv1.Result); r.GetIndexResult() != nil {
				(*on)(r.GetIndexResult().Namespace)
			}
		}
	}
	sm.advance(logs[len(logs)-1].Index)
	return out
}

// entriesOf converts Raft's entries into fsm's, in the reused buffer: the
// entries share the logs' bytes, so a batch costs no allocation once the
// buffer has grown to Raft's largest batch.
func (sm *stateMachine) entriesOf(logs []*raft.Log) []fsm.Entry {
	entries := slices.Grow(sm.entries[:0], len(logs))[:len(logs)]
	for i, l := range logs {
		entries[i] = fsm.Entry{Index: l.Index, Term: l.Term, Kind: entryKind(l.Type), Data: l.Data, Extensions: l.Extensions}
	}
	sm.entries = entries
	return entries
}

// entryKind maps a Raft log type onto fsm's. Raft hands a BatchingFSM
// commands and configurations only; fsm applies anything else as a no-op.
func entryKind(t raft.LogType) fsm.EntryKind {
	switch t {
	case raft.LogCommand:
		return fsm.EntryCommand
	case raft.LogConfiguration:
		return fsm.EntryConfiguration // Data: raft.EncodeConfiguration, kept as is
	}
	return fsm.EntryOther
}

// Apply implements raft.FSM.
func (sm *stateMachine) Apply(l *raft.Log) any { return sm.ApplyBatch([]*raft.Log{l})[0] }

// Snapshot implements raft.FSM. The store is its own snapshot: Snapshot
// makes the applied state durable (fsm.Store.SyncFloor) so Raft may compact
// its log, and Persist writes nothing. It is meant for the snapshot store
// of snapshot.go, whose sink records the position (fsm.Store.RecordFloor)
// when nothing was written and whose Open streams a checkpoint to
// followers that need one; it is not usable with raft.FileSnapshotStore.
func (sm *stateMachine) Snapshot() (raft.FSMSnapshot, error) {
	start := time.Now()
	if _, err := sm.store.SyncFloor(); err != nil {
		return nil, err
	}
	sm.metrics.snapshot.Observe(time.Since(start).Seconds())
	sm.metrics.snapshots.WithLabelValues("local").Inc()
	return floorSnapshot{}, nil
}

type floorSnapshot struct{}

func (floorSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (floorSnapshot) Release()                             {}

// Restore implements raft.FSM: the whole state is replaced, so every
// subscriber's watch ends. Raft may wrap rc (to count what is read);
// the store gets the reader underneath, so a staged checkpoint is swapped
// in without copying.
func (sm *stateMachine) Restore(rc io.ReadCloser) error {
	if w, ok := rc.(raft.ReadCloserWrapper); ok {
		rc = w.WrappedReadCloser()
	}
	if err := sm.store.Restore(rc); err != nil {
		return err
	}
	floor, err := sm.store.Floor()
	if err != nil {
		return err
	}
	sm.feed.EndAll()
	sm.set(floor.Index)
	if on := sm.onIndex.Load(); on != nil {
		for _, ns := range sm.store.IndexedNamespaces() {
			(*on)(ns)
		}
	}
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
