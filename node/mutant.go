package node

import "fmt"

// Mutants are deliberate bugs the chaos harness (jepsen/) must catch. This
// file holds only their names; their code is in mutant_on.go, compiled
// only with -tags mutants, which sets the node's hooks (hooks.go). In
// every other binary MutantsBuilt is false, the hooks stay nil, and Open
// refuses Config.Mutant.
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
	// MutantCheckpointAhead saves a subscription group's checkpoint at its
	// read position instead of below its lowest unsettled message: after a
	// leader change, messages delivered but never acknowledged are skipped.
	MutantCheckpointAhead = "checkpoint-ahead-of-acks"
	// MutantConditionAtPropose evaluates an append's condition (DCB) on the
	// leader before proposing, from what it has applied, and marks it as
	// decided (apply skips it): two deciders whose conditions each miss the
	// other's in-flight append both succeed.
	MutantConditionAtPropose = "condition-at-propose"
	// MutantExpireOneTooMany has the leader's expiry entries remove one
	// position more than the retention policies allow: the oldest message
	// a max-count policy keeps goes too (and the first message younger
	// than an age limit).
	MutantExpireOneTooMany = "expire-one-too-many"
	// MutantExpireAgeEarly has the leader's expiry entries count max-age
	// limits as half as long: messages go while still young enough to keep.
	MutantExpireAgeEarly = "expire-age-early"
	// MutantIndexDropEntry has this node's index loop write no entry for
	// matching messages whose global position is a multiple of 50.
	MutantIndexDropEntry = "index-drop-entry"
	// MutantIndexSkipRemoval has this node's index loop ignore the
	// removal records of runs that start at an even global position:
	// the entries of removed messages stay (queries skip them, the entry
	// count does not).
	MutantIndexSkipRemoval = "index-skip-removal"
)

// Mutants lists every mutant name.
var Mutants = []string{MutantCASOutsideFSM, MutantAckBeforeCommit, MutantStaleLinearizable, MutantRYWNoWait, MutantForwardRetry, MutantGlobalPosAtPropose, MutantDedupeAtPropose, MutantCheckpointAhead, MutantConditionAtPropose, MutantExpireOneTooMany, MutantExpireAgeEarly, MutantIndexDropEntry, MutantIndexSkipRemoval}

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
