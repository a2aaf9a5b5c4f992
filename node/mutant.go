package node

import (
	"fmt"
	"sync"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/rpc/gen/skald/fsm/v1"
)

// Mutants are deliberate bugs the chaos harness (jepsen/) must catch. They
// exist only in binaries built with -tags mutants: elsewhere MutantsBuilt
// is false, every n.mutant(...) check is constant false, and Config.Mutant
// is refused by Open.
const (
	// MutantCASOutsideFSM checks an append's expected version on the
	// leader before proposing, not at apply: two concurrent appends with
	// the same expected version both succeed.
	MutantCASOutsideFSM = "cas-outside-fsm"
	// MutantAckBeforeCommit answers a write once it is handed to Raft,
	// with positions guessed from the current state, before it commits.
	MutantAckBeforeCommit = "ack-before-commit"
	// MutantStaleLinearizable serves linearizable client reads from
	// whatever this node has applied, without asking or verifying the
	// leader.
	MutantStaleLinearizable = "stale-linearizable"
	// MutantRYWNoWait serves session reads without waiting for min_index.
	MutantRYWNoWait = "ryw-no-wait"
	// MutantForwardRetry gives a forwarded write forwardRetryTimeout to
	// answer and retries it when it does not (or its outcome is otherwise
	// unknown): a slow leader applies it twice.
	MutantForwardRetry = "forward-retry"
	// MutantGlobalPosAtPropose has the leader pick global positions from
	// an in-memory counter when it proposes, and the state machine use
	// them: proposals that fail leave gaps, a new leader's counter
	// restarts from what it applied, and log order and position order
	// can differ.
	MutantGlobalPosAtPropose = "global-pos-at-propose"
	// MutantDedupeAtPropose decides idempotent writes on the leader before
	// proposing, from what it has applied, and marks the rest as decided
	// (apply records their ids without checking them): a retry proposed
	// while its original is still in flight is written twice.
	MutantDedupeAtPropose = "dedupe-at-propose"
	// MutantConditionAtPropose evaluates an append's condition (DCB) on the
	// leader before proposing, from what it has applied, and marks it as
	// decided (apply skips it): two deciders whose conditions each miss the
	// other's in-flight append both succeed.
	MutantConditionAtPropose = "condition-at-propose"
)

const forwardRetryTimeout = 5 * time.Millisecond

// Mutants lists every mutant name.
var Mutants = []string{MutantCASOutsideFSM, MutantAckBeforeCommit, MutantStaleLinearizable, MutantRYWNoWait, MutantForwardRetry, MutantGlobalPosAtPropose, MutantDedupeAtPropose, MutantConditionAtPropose}

func (n *Node) mutant(name string) bool { return MutantsBuilt && n.cfg.Mutant == name }

func checkMutant(name string) error {
	if name == "" {
		return nil
	}
	if !MutantsBuilt {
		return fmt.Errorf("node: mutant %q: this binary was built without -tags mutants", name)
	}
	for _, m := range Mutants {
		if m == name {
			return nil
		}
	}
	return fmt.Errorf("node: unknown mutant %q (known: %v)", name, Mutants)
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
func (n *Node) ackBeforeCommit(cmd *fsmv1.Command) (any, bool) {
	a := cmd.GetAppend()
	if a == nil {
		return nil, false
	}
	v, err := n.store.View(a.Namespace)
	if err != nil {
		return nil, false
	}
	defer v.Close()
	cur, err1 := v.StreamVersion(a.Stream)
	gp, err2 := v.NextGlobalPosition()
	if err1 != nil || err2 != nil {
		return nil, false
	}
	k := int64(len(a.Messages))
	return &fsm.AppendResult{
		Namespace: a.Namespace, Stream: a.Stream,
		FirstPosition: cur + 1, LastPosition: cur + k,
		FirstGlobalPosition: gp, LastGlobalPosition: gp + k - 1,
		Index: n.raft.LastIndex(),
	}, true
}

// proposedGlobal is MutantGlobalPosAtPropose's counter.
type proposedGlobal struct {
	mu   sync.Mutex
	next map[string]int64 // namespace → next global position to hand out
}

// stamp sets cmd's proposed global position from the counter, raised to
// this node's applied next position when that is ahead.
func (p *proposedGlobal) stamp(n *Node, cmd *fsmv1.Command) {
	a := cmd.GetAppend()
	if a == nil {
		return
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
	a.ProposedGlobalPosition = next
	p.next[a.Namespace] = next + int64(len(a.Messages))
}

// dedupeAtPropose is MutantDedupeAtPropose: when every client-given id of
// an append is in this node's applied id index, it answers the first one's
// positions as a duplicate without proposing; otherwise it marks the
// append decided, so that apply writes it without checking.
func (n *Node) dedupeAtPropose(cmd *fsmv1.Command) (any, bool) {
	a := cmd.GetAppend()
	if a == nil {
		return nil, false
	}
	a.DedupeDecidedAtPropose = true
	v, err := n.store.View(a.Namespace)
	if err != nil {
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
	k := int64(len(a.Messages))
	return &fsm.AppendResult{
		Namespace: a.Namespace, Stream: a.Stream,
		FirstPosition: first.Position, LastPosition: first.Position + k - 1,
		FirstGlobalPosition: first.GlobalPosition, LastGlobalPosition: first.GlobalPosition + k - 1,
		Index: n.AppliedIndex(), Duplicate: true,
	}, true
}

// conditionAtPropose is the condition-at-propose mutant: it decides an
// append's condition against this node's applied state and marks it
// decided, so apply does not look again.
func (n *Node) conditionAtPropose(cmd *fsmv1.Command) error {
	var c *fsmv1.AppendCondition
	var ns string
	switch k := cmd.Kind.(type) {
	case *fsmv1.Command_Append:
		c, ns = k.Append.Condition, k.Append.Namespace
	case *fsmv1.Command_AppendMulti:
		c, ns = k.AppendMulti.Condition, k.AppendMulti.Namespace
	}
	if c == nil || fsm.ValidateQuery("condition.fail_if_events_match", fsm.QueryOf(c.FailIfEventsMatch)) != nil {
		return nil // apply refuses it
	}
	v, err := n.store.View(ns)
	if err != nil {
		return nil
	}
	defer v.Close()
	c.DecidedAtPropose = true
	if msgs, err := v.Query(fsm.QueryOf(c.FailIfEventsMatch), c.After, 1); err == nil && len(msgs) > 0 {
		return &fsm.ConditionFailedError{After: c.After, GlobalPosition: msgs[0].GlobalPosition}
	}
	return nil
}
