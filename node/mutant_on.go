//go:build mutants

package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// MutantsBuilt reports whether this binary carries the mutants (see
// mutant.go). This file is compiled only with -tags mutants.
const MutantsBuilt = true

const forwardRetryTimeout = 5 * time.Millisecond

// installMutant sets the hooks of the mutant Config.Mutant names (none
// when it is empty; Open already refused unknown names).
func (n *Node) installMutant() {
	switch n.cfg.Mutant {
	case MutantCASOutsideFSM:
		n.hooks.propose = func(cmd *fsmv1.Command) (*fsmv1.Result, bool, []byte, error) {
			return nil, false, nil, n.casOutsideFSM(cmd)
		}
	case MutantAckBeforeCommit:
		n.hooks.proposed = n.ackBeforeCommit
	case MutantStaleLinearizable:
		n.hooks.skipReadBarrier = func(c nodeapi.Consistency) bool { return c == nodeapi.Linearizable }
	case MutantRYWNoWait:
		n.hooks.skipReadBarrier = func(c nodeapi.Consistency) bool { return c == nodeapi.Session }
	case MutantForwardRetry:
		n.hooks.forward = n.forwardRetry
	case MutantGlobalPosAtPropose:
		var counter proposedGlobal
		n.hooks.propose = func(cmd *fsmv1.Command) (*fsmv1.Result, bool, []byte, error) {
			if gp := counter.take(n, cmd); gp > 0 {
				return nil, false, fsm.MutantExtensions(gp, 0), nil
			}
			return nil, false, nil, nil
		}
	case MutantExpireOneTooMany, MutantExpireAgeEarly:
		flag := fsm.ExpireOneTooMany
		if n.cfg.Mutant == MutantExpireAgeEarly {
			flag = fsm.ExpireAgeEarly
		}
		ext := fsm.MutantExtensions(0, flag)
		n.hooks.propose = func(cmd *fsmv1.Command) (*fsmv1.Result, bool, []byte, error) {
			if cmd.GetExpireMessages() == nil {
				return nil, false, nil, nil
			}
			return nil, false, ext, nil
		}
	case MutantCheckpointAhead:
		n.hooks.groupCheckpoint = func(_, read int64) int64 { return read }
	case MutantDedupeAtPropose:
		n.hooks.propose = func(cmd *fsmv1.Command) (*fsmv1.Result, bool, []byte, error) {
			if cmd.GetAppend() == nil {
				return nil, false, nil, nil
			}
			if res, ok := n.dedupeAtPropose(cmd); ok {
				return res, true, nil, nil
			}
			return nil, false, fsm.MutantExtensions(0, fsm.IDsDecided), nil
		}
	case MutantConditionAtPropose:
		n.hooks.propose = func(cmd *fsmv1.Command) (*fsmv1.Result, bool, []byte, error) {
			decided, err := n.conditionAtPropose(cmd)
			if err != nil || !decided {
				return nil, false, nil, err
			}
			return nil, false, fsm.MutantExtensions(0, fsm.ConditionDecided), nil
		}
	}
}

// indexMutant is the store's index loop mutant for name (0: none).
func indexMutant(name string) byte {
	switch name {
	case MutantIndexDropEntry:
		return fsm.IndexDropEntry
	case MutantIndexSkipRemoval:
		return fsm.IndexSkipRemoval
	}
	return 0
}

// forwardRetry is MutantForwardRetry: it gives a forwarded write
// forwardRetryTimeout to answer and, when it does not, reports it as not
// sent, so Apply sends it again.
func (n *Node) forwardRetry(ctx context.Context, addr string, cmd *fsmv1.Command) (*fsmv1.Result, error) {
	fctx, cancel := context.WithTimeout(ctx, forwardRetryTimeout)
	res, err := n.peers.apply(fctx, addr, cmd)
	cancel()
	if errors.Is(err, nodeapi.ErrUnknownOutcome) && ctx.Err() == nil {
		err = errNotSent
	}
	return res, err
}

// casOutsideFSM is MutantCASOutsideFSM: it checks the expected version
// against this node's state and strips it from the command.
func (n *Node) casOutsideFSM(cmd *fsmv1.Command) error {
	a := cmd.GetAppend()
	if a == nil || a.ExpectedVersion == nil {
		return nil
	}
	v, err := n.store.View(a.Namespace)
	if err != nil {
		return err
	}
	defer v.Close()
	cur, err := v.StreamVersion(a.Stream)
	if err != nil {
		return err
	}
	if cur != *a.ExpectedVersion {
		return &fsm.VersionConflictError{Stream: a.Stream, Expected: *a.ExpectedVersion, Actual: cur}
	}
	a.ExpectedVersion = nil
	return nil
}

// ackBeforeCommit is MutantAckBeforeCommit: the result an append would
// have if nothing else were in flight, reported before it commits.
func (n *Node) ackBeforeCommit(cmd *fsmv1.Command) (*fsmv1.Result, bool) {
	a, v := n.appendView(cmd)
	if v == nil {
		return nil, false
	}
	defer v.Close()
	cur, err1 := v.StreamVersion(a.Stream)
	gp, err2 := v.NextGlobalPosition()
	if err1 != nil || err2 != nil {
		return nil, false
	}
	return appendAnswer(a, n.raft.LastIndex(), cur+1, gp, false), true
}

// appendView is cmd's append and a view of its namespace on this node,
// which the caller closes; nil, nil when cmd is no append or the
// namespace cannot be read.
func (n *Node) appendView(cmd *fsmv1.Command) (*fsmv1.Append, *fsm.View) {
	a := cmd.GetAppend()
	if a == nil {
		return nil, nil
	}
	v, err := n.store.View(a.Namespace)
	if err != nil {
		return nil, nil
	}
	return a, v
}

// appendAnswer is what the leader answers for a's messages written at
// stream positions from pos and global positions from gp, at Raft index.
func appendAnswer(a *fsmv1.Append, index uint64, pos, gp int64, duplicate bool) *fsmv1.Result {
	k := int64(len(a.Messages))
	return &fsmv1.Result{Index: index, Result: &fsmv1.Result_Append{Append: &fsmv1.AppendResult{
		Namespace: a.Namespace, Stream: a.Stream,
		FirstPosition: pos, LastPosition: pos + k - 1,
		FirstGlobalPosition: gp, LastGlobalPosition: gp + k - 1,
		Duplicate: duplicate,
	}}}
}

// proposedGlobal is MutantGlobalPosAtPropose's counter.
type proposedGlobal struct {
	mu   sync.Mutex
	next map[string]int64 // namespace → next global position to hand out
}

// take hands out cmd's global positions from the counter, raised to this
// node's applied next position when that is ahead; 0 for anything but an
// append.
func (p *proposedGlobal) take(n *Node, cmd *fsmv1.Command) int64 {
	a := cmd.GetAppend()
	if a == nil {
		return 0
	}
	applied := int64(1)
	if v, err := n.store.View(a.Namespace); err == nil {
		applied, _ = v.NextGlobalPosition()
		v.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == nil {
		p.next = map[string]int64{}
	}
	next := max(p.next[a.Namespace], applied)
	p.next[a.Namespace] = next + int64(len(a.Messages))
	return next
}

// dedupeAtPropose is MutantDedupeAtPropose: when every client-given id of
// an append is in this node's applied id index, it answers the first one's
// positions as a duplicate without proposing; otherwise the caller marks
// the entry decided, so that apply writes it without checking.
func (n *Node) dedupeAtPropose(cmd *fsmv1.Command) (*fsmv1.Result, bool) {
	a, v := n.appendView(cmd)
	if v == nil {
		return nil, false
	}
	defer v.Close()
	var first fsm.Message
	for i, m := range a.Messages {
		if !m.ClientId {
			return nil, false
		}
		got, ok, err := v.LookupID(m.Id)
		if err != nil || !ok {
			return nil, false
		}
		if i == 0 {
			first = got
		}
	}
	return appendAnswer(a, n.AppliedIndex(), first.Position, first.GlobalPosition, true), true
}

// conditionAtPropose is MutantConditionAtPropose: it decides an append's
// condition against this node's applied state; decided reports that the
// caller must mark the entry so apply does not look again.
func (n *Node) conditionAtPropose(cmd *fsmv1.Command) (decided bool, err error) {
	var c *fsmv1.AppendCondition
	var ns string
	switch k := cmd.Kind.(type) {
	case *fsmv1.Command_Append:
		c, ns = k.Append.Condition, k.Append.Namespace
	case *fsmv1.Command_AppendMulti:
		c, ns = k.AppendMulti.Condition, k.AppendMulti.Namespace
	}
	if c == nil || fsm.ValidateQuery("condition.fail_if_events_match", fsm.QueryOf(c.FailIfEventsMatch)) != nil {
		return false, nil // apply refuses it
	}
	v, err := n.store.View(ns)
	if err != nil {
		return false, nil
	}
	defer v.Close()
	if msgs, err := v.Query(fsm.QueryOf(c.FailIfEventsMatch), c.After, 1); err == nil && len(msgs) > 0 {
		return true, &fsm.ConditionFailedError{After: c.After, GlobalPosition: msgs[0].GlobalPosition}
	}
	return true, nil
}
