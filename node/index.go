package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// User-defined indexes (fsm/index.go, fsm/indexer.go). Definitions are
// log entries; the entries are node-local, written by one loop per
// namespace with indexes on every node, off the apply path:
//
//   - a loop starts when the node opens (for each namespace _metadata
//     names as indexed), when this node applies a CreateIndex (the state
//     machine calls indexLoops.ensure from Raft's FSM goroutine: it never
//     blocks), and after a snapshot is restored; it is added to n.wg as
//     it starts, never once shutdown began;
//   - each round is fsm.Store.IndexRound (bounded); a round that reached
//     the end waits for the next applied entry, and starts no sooner than
//     Config.IndexInterval after the previous round started, so that
//     rounds batch the writes of busy namespaces; a reader's kick starts
//     one at once (indexLoop);
//   - a loop ends when its namespace is gone or has no index left.
//
// Rolling upgrades: a replica that does not know CreateIndex would apply
// it as a malformed command while the others store the definition, and
// their states would differ. So CreateIndex, DeleteIndex, RebuildIndex and
// SetIndexState are proposed only once every server of the configuration
// is known to apply fsm.IndexesVersion (the version gate, version.go),
// and refused otherwise with ErrUpgradeRequired: checked
// by the node that takes the call (an older leader would not check) and
// again by the leader when it proposes (fsm.Kind.Version, checkVersion).

// CreateIndex is Apply for an index definition, after refuseCreateIndex.
func (n *Node) CreateIndex(ctx context.Context, c *fsmv1.CreateIndex) (*fsmv1.Result, error) {
	if err := n.refuseCreateIndex(ctx, c); err != nil {
		return nil, err
	}
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_CreateIndex{CreateIndex: c}})
}

// DeleteIndex is Apply for an index deletion.
func (n *Node) DeleteIndex(ctx context.Context, c *fsmv1.DeleteIndex) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_DeleteIndex{DeleteIndex: c}})
}

// RebuildIndex is Apply for an index rebuild (a new definition or the
// same one, built beside the current one).
func (n *Node) RebuildIndex(ctx context.Context, c *fsmv1.RebuildIndex) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_RebuildIndex{RebuildIndex: c}})
}

// SetIndexState is Apply for pausing or resuming an index on every node
// (fsm/indexstate.go).
func (n *Node) SetIndexState(ctx context.Context, c *fsmv1.SetIndexState) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_SetIndexState{SetIndexState: c}})
}

// ReadIndexed is Read for reads of index (every index of the namespace
// when ""): at LINEARIZABLE and SESSION it also waits, within ctx (or
// Config.ReadWait when ctx has no deadline), until that index on this
// node holds every message of the entries the read must see; LOCAL
// answers at once (IndexInfo.Covered and LagEvents say how far behind
// the index is). Each index is waited for alone: one that builds holds
// back no read of its siblings.
//
// Errors: those of Read, nodeapi.ErrNotCaughtUp when the index did not
// catch up in time, fsm.ErrIndexPaused at once when the index is paused
// short of the read, and fsm.ErrIndexFailed when it failed on this node.
func (n *Node) ReadIndexed(ctx context.Context, ns, index string, opts nodeapi.ReadOptions, fn func(*fsm.View) error) (uint64, error) {
	var target uint64
	switch opts.Consistency {
	case nodeapi.Linearizable:
		idx, err := n.LinearizableIndex(ctx)
		if err != nil {
			return 0, err
		}
		target = idx
	default:
		if err := n.ReadBarrier(ctx, opts); err != nil {
			return 0, err
		}
		target = opts.MinIndex
	}
	applied := n.sm.appliedIndex()
	// The read index may be past the last entry the state machine saw (a
	// no-op); everything up to it that holds state is applied by now.
	target = min(target, applied)
	wait := opts.Consistency != nodeapi.Local && target > 0
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok && wait {
		wctx, cancel = context.WithTimeout(ctx, n.cfg.ReadWait)
	}
	defer cancel()
	for {
		if wait {
			n.indexLoops.kick(ns)
			err := n.store.WaitIndexed(wctx, ns, index, target)
			switch {
			case errors.Is(err, fsm.ErrNamespaceNotFound), errors.Is(err, fsm.ErrIndexPaused), errors.Is(err, fsm.ErrIndexFailed):
				return applied, err // waiting longer would not help
			case err != nil:
				covered := n.store.IndexCovered(ns)
				if index != "" {
					covered = n.store.IndexCoveredBy(ns, index)
				}
				return 0, fmt.Errorf("%w: index %q of namespace %q holds the entries up to %d on this node, the read needs %d: %v",
					nodeapi.ErrNotCaughtUp, index, ns, covered, target, err)
			}
		}
		v, err := n.store.View(ns)
		if err != nil {
			return applied, err
		}
		v.SetContext(ctx) // as Read: a long read ends with its caller
		if wait && index != "" {
			// The name may have been deleted and created again since
			// the wait: the view's own index must cover the read.
			if c := v.IndexCovered(index); c < target {
				if _, err := v.Index(index); err == nil {
					v.Close()
					if err := wctx.Err(); err != nil {
						return 0, fmt.Errorf("%w: index %q of namespace %q was created again while the read waited: %v", nodeapi.ErrNotCaughtUp, index, ns, err)
					}
					continue
				}
			}
		}
		err = fn(v)
		v.Close()
		return applied, err
	}
}

// FailedIndexes lists the indexes this node stopped maintaining after an
// error confined to each (fsm.Store.FailedIndexes): their queries fail
// here until they are rebuilt or deleted; the node's other work and its
// other indexes go on.
func (n *Node) FailedIndexes() ([]fsm.IndexFailure, error) { return n.store.FailedIndexes() }

// indexLoops are the node's per-namespace index loops.
type indexLoops struct {
	n      *Node
	mu     sync.Mutex
	closed bool                     // shutdown began: start no loop
	loops  map[string]chan struct{} // namespace -> its loop's kick
}

// ensure starts namespace ns's loop, or kicks it when it runs. It never
// blocks (Raft's FSM goroutine calls it).
func (l *indexLoops) ensure(ns string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if kick, ok := l.loops[ns]; ok {
		select {
		case kick <- struct{}{}:
		default:
		}
		return
	}
	if l.loops == nil {
		l.loops = make(map[string]chan struct{})
	}
	kick := make(chan struct{}, 1)
	l.loops[ns] = kick
	l.n.wg.Add(1)
	go l.n.indexLoop(ns, kick)
}

// kick wakes namespace ns's loop, if it runs (a reader waits for it).
func (l *indexLoops) kick(ns string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if kick, ok := l.loops[ns]; ok {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// exit removes ns's loop unless it was kicked meanwhile (an index may
// have been created since its last round): the loop returns only when
// exit says so.
func (l *indexLoops) exit(ns string, kick chan struct{}) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-kick:
		return false
	default:
	}
	delete(l.loops, ns)
	return true
}

// close makes ensure start no more loops; the running ones end with the
// node's life.
func (l *indexLoops) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// startIndexLoops starts the loop of every namespace _metadata names as
// indexed (at open, and after a restore replaced the state).
func (n *Node) startIndexLoops() {
	for _, ns := range n.store.IndexedNamespaces() {
		n.indexLoops.ensure(ns)
	}
}

// indexLoop maintains namespace ns's indexes until the node closes or the
// namespace has none left.
//
// Wake-ups are coalesced: the loop takes the state machine's change
// channel before each round, so however many batches the node applies
// during a round, they wake it once, and the next round reads them all.
// Rounds of a busy namespace are batched by time: a round starts no
// sooner than Config.IndexInterval after the previous one started (so
// each reads what arrived over about an interval, up to its bounds of
// fsm.DefaultIndexRoundMessages messages, fsm.DefaultIndexRoundReadBytes
// read and fsm.DefaultIndexRoundBatchBytes written; past a bound the next
// round starts at once), while a write after a quiet spell is indexed at once. A
// reader's kick (ReadIndexed at LINEARIZABLE or SESSION) starts a round
// without waiting for the interval: the reader waits for it.
func (n *Node) indexLoop(ns string, kick chan struct{}) {
	defer n.wg.Done()
	failures := 0
	for {
		changed, _ := n.sm.wait() // before the round: an apply during it wakes the next
		started := time.Now()
		res, err := n.store.IndexRound(ns, fsm.DefaultIndexRoundMessages)
		switch {
		case errors.Is(err, fsm.ErrNamespaceNotFound), err == nil && res.Indexes == 0 && !res.More:
			if n.indexLoops.exit(ns, kick) {
				return
			}
			continue
		case err != nil:
			failures++
			if failures == 1 || failures%100 == 0 {
				n.log.Error("index round failed; retrying", "namespace", ns, "err", err, "failures", failures)
			}
			select {
			case <-n.closing:
				return
			case <-time.After(min(time.Duration(failures)*100*time.Millisecond, 5*time.Second)):
			}
			continue
		}
		failures = 0
		for _, f := range res.Failed {
			n.log.Error("index failed on this node; its queries fail until it is rebuilt or deleted",
				"namespace", f.Namespace, "index", f.Index, "id", f.ID, "reason", f.Reason)
		}
		if res.More {
			select {
			case <-n.closing:
				return
			default:
			}
			continue
		}
		select {
		case <-n.closing:
			return
		case <-kick:
			continue // a reader waits: no batching
		case <-changed:
		}
		if wait := time.Until(started.Add(n.cfg.IndexInterval)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-n.closing:
				t.Stop()
				return
			case <-kick:
			case <-t.C:
			}
			t.Stop()
		}
	}
}
