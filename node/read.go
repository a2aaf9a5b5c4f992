package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node/nodeapi"
)

// Read waits until this node may serve a read at the requested
// consistency, then calls fn with a consistent view of namespace ns. It
// returns the applied index the view reflects at least.
//
// Errors: fsm.ErrNamespaceNotFound; nodeapi.ErrNoLeader (linearizable
// without a leader); nodeapi.ErrNotCaughtUp (the required index was not
// reached within Config.ReadWait or the context); nodeapi.ErrStale
// (local, past MaxStaleness).
func (n *Node) Read(ctx context.Context, ns string, opts nodeapi.ReadOptions, fn func(*fsm.View) error) (uint64, error) {
	if err := n.ReadBarrier(ctx, opts); err != nil {
		return 0, err
	}
	applied := n.sm.appliedIndex()
	v, err := n.store.View(ns)
	if err != nil {
		return applied, err
	}
	defer v.Close()
	v.SetContext(ctx)
	return applied, fn(v)
}

// ReadBarrier waits until a read at opts may be served here: what Read
// does before it opens its view.
func (n *Node) ReadBarrier(ctx context.Context, opts nodeapi.ReadOptions) error {
	start := time.Now()
	defer func() { n.m.readWait.Observe(time.Since(start).Seconds()) }()
	if n.hooks.skipReadBarrier != nil && n.hooks.skipReadBarrier(opts.Consistency) {
		return nil
	}
	switch opts.Consistency {
	case nodeapi.Linearizable:
		_, err := n.LinearizableIndex(ctx)
		return err
	case nodeapi.Session:
		ctx, cancel := n.readContext(ctx)
		defer cancel()
		if err := n.checkMinIndex(ctx, opts.MinIndex); err != nil {
			return err
		}
		if err := n.waitApplied(ctx, opts.MinIndex); err != nil {
			return fmt.Errorf("%w: index %d not applied (at %d): %v", nodeapi.ErrNotCaughtUp, opts.MinIndex, n.sm.appliedIndex(), err)
		}
		return nil
	case nodeapi.Local:
		if opts.MaxStaleness <= 0 || n.raft.State() == raft.Leader {
			return nil
		}
		last := n.raft.LastContact()
		if last.IsZero() || time.Since(last) > opts.MaxStaleness {
			return fmt.Errorf("%w: leader last heard %s ago, bound %s", nodeapi.ErrStale, sinceOrNever(last), opts.MaxStaleness)
		}
		return nil
	}
	return fmt.Errorf("node: unknown consistency %d", opts.Consistency)
}

// checkMinIndex refuses a SESSION min index that no acknowledged write
// can have given: one past the leader's commit index. Only an index past
// this node's own log is asked of the leader, so a session read that can
// be served costs nothing more; when the leader cannot be asked, the
// read waits for the index as before.
func (n *Node) checkMinIndex(ctx context.Context, min uint64) error {
	if min <= n.raft.LastIndex() {
		return nil
	}
	commit, err := n.readIndex(ctx)
	if err != nil || min <= commit {
		return nil
	}
	return &fsm.ValidationError{Field: "read.min_index",
		Reason: fmt.Sprintf("%d is past the cluster's commit index %d: no write was acknowledged at it", min, commit)}
}

func sinceOrNever(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return time.Since(t).Round(time.Millisecond).String()
}

func (n *Node) readContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, n.cfg.ReadWait)
}

// LinearizableIndex waits until this node has applied every write
// acknowledged before the call, and returns that index. On the leader it
// is the read index (commit index after a Barrier in this term, confirmed
// by VerifyLeader); a follower asks the leader for it.
func (n *Node) LinearizableIndex(ctx context.Context) (uint64, error) {
	ctx, cancel := n.readContext(ctx)
	defer cancel()
	deadline := time.Now().Add(n.cfg.LeaderWait)
	for attempt := 0; ; attempt++ {
		idx, err := n.readIndex(ctx)
		if err == nil {
			if werr := n.waitApplied(ctx, idx); werr != nil {
				return 0, fmt.Errorf("%w: read index %d not applied (at %d): %v", nodeapi.ErrNotCaughtUp, idx, n.sm.appliedIndex(), werr)
			}
			return idx, nil
		}
		if !errors.Is(err, errNotLeader) && !errors.Is(err, errNotSent) && !errors.Is(err, nodeapi.ErrNoLeader) {
			return 0, err
		}
		if time.Now().After(deadline) {
			return 0, nodeapi.ErrNoLeader
		}
		if err := n.sleepCtx(ctx, backoff(attempt)); err != nil {
			return 0, fmt.Errorf("%w: %v", nodeapi.ErrNoLeader, err)
		}
	}
}

// readIndex is the read index from this node if it leads, else from the
// leader; concurrent calls share one confirmation (indexBatcher).
func (n *Node) readIndex(ctx context.Context) (uint64, error) {
	if n.raft.State() == raft.Leader {
		idx, err := n.leaderIndex.get(ctx)
		if !errors.Is(err, errNotLeader) {
			return idx, err
		}
	}
	return n.remoteIndex.get(ctx)
}

func (n *Node) remoteReadIndex(ctx context.Context) (uint64, error) {
	addr, ok := n.leaderPeer()
	if !ok {
		return 0, nodeapi.ErrNoLeader
	}
	return n.peers.readIndex(ctx, addr)
}

// leaderReadIndex returns the read index if this node is the leader: a
// Barrier once per term (so the state machine holds every entry of earlier
// terms), then the commit index, then VerifyLeader (so no newer leader
// exists that could have committed more).
func (n *Node) leaderReadIndex(ctx context.Context) (uint64, error) {
	if n.raft.State() != raft.Leader {
		return 0, errNotLeader
	}
	term := n.raft.CurrentTerm()
	if n.barrierTerm.Load() != term {
		if err := waitFuture(ctx, n.raft.Barrier(n.cfg.ApplyTimeout)); err != nil {
			return 0, leadershipErr(err)
		}
		n.barrierTerm.Store(term)
	}
	idx := n.raft.CommitIndex()
	if err := waitFuture(ctx, n.raft.VerifyLeader()); err != nil {
		return 0, leadershipErr(err)
	}
	return idx, nil
}

func leadershipErr(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return errNotLeader
	}
	return err
}

func waitFuture(ctx context.Context, f raft.Future) error { return waitFutureThen(ctx, f, nil) }

// waitFutureThen is waitFuture, and runs then (when not nil) once f is
// answered, even after ctx ended: from the one goroutine that waits on f,
// since a Raft future's Error must not be called from two at once.
func waitFutureThen(ctx context.Context, f raft.Future, then func()) error {
	errc := make(chan error, 1)
	go func() {
		err := f.Error()
		if then != nil {
			then()
		}
		errc <- err
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitApplied blocks until the state machine holds every state change at
// or below index. The state machine sees only commands and configuration
// entries, not Raft's no-ops and barriers, so when index is such an entry
// the wait is for the last state-changing entry at or below it: once Raft
// has handed everything up to index to the state machine, that entry is
// found by walking the local log back from index.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ch, applied := n.sm.wait()
		if applied >= index {
			return nil
		}
		if n.raft.AppliedIndex() >= index && n.lastStateIndex(index, applied) <= applied {
			return nil
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.closing:
			return nodeapi.ErrShutdown
		}
	}
}

// lastStateIndex returns the index of the last command or configuration
// entry at or below index, looking no lower than floor.
func (n *Node) lastStateIndex(index, floor uint64) uint64 {
	var l raft.Log
	for i := index; i > floor; i-- {
		if err := n.logs.GetLog(i, &l); err != nil {
			return i // compacted or missing: be conservative
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return i
		}
	}
	return floor
}
