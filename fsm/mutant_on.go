//go:build mutants

package fsm

import "encoding/binary"

// The chaos harness's mutant leaders (node/mutant_on.go) pass what they
// decided before proposing in the Raft entry's Extensions, never in the
// replicated command: a global position they chose, whether they already
// decided the append's client ids or its condition, and how an expiry
// entry must go wrong. Compiled only with -tags mutants; mutant_off.go
// makes every reader constant.

// Decisions a mutant leader took before proposing.
const (
	IDsDecided       byte = 1 << iota // dedupe-at-propose
	ConditionDecided                  // condition-at-propose
	ExpireOneTooMany                  // expire-one-too-many: expiry removes one position more than the limits allow
	ExpireAgeEarly                    // expire-age-early: expiry counts age limits as half as long
)

// MutantExtensions encodes a mutant leader's decisions for an entry: the
// global position it chose (0: none) and the decisions it took.
func MutantExtensions(proposedGlobal int64, decided byte) []byte {
	b := make([]byte, 9)
	binary.BigEndian.PutUint64(b, uint64(proposedGlobal))
	b[8] = decided
	return b
}

// proposedGlobal is the global position a global-pos-at-propose leader
// chose for l, 0 when none: the mutant's bug is that apply trusts it.
func proposedGlobal(l *Entry) int64 {
	if len(l.Extensions) != 9 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(l.Extensions))
}

// idsDecidedByLeader reports that a dedupe-at-propose leader already
// decided l's client ids: the mutant's bug is that apply skips its check.
func idsDecidedByLeader(l *Entry) bool {
	return len(l.Extensions) == 9 && l.Extensions[8]&IDsDecided != 0
}

// conditionDecidedByLeader reports that a condition-at-propose leader
// already evaluated l's condition: the mutant's bug is that apply does not.
func conditionDecidedByLeader(l *Entry) bool {
	return len(l.Extensions) == 9 && l.Extensions[8]&ConditionDecided != 0
}

// expireOneTooMany and expireAgeEarly report an expiry mutant's bug for
// entry l (an ExpireMessages of an expire-one-too-many or
// expire-age-early leader).
func expireOneTooMany(l *Entry) bool {
	return len(l.Extensions) == 9 && l.Extensions[8]&ExpireOneTooMany != 0
}

func expireAgeEarly(l *Entry) bool {
	return len(l.Extensions) == 9 && l.Extensions[8]&ExpireAgeEarly != 0
}

// Index loop mutants (Options.IndexMutant): the node's loop is not a log
// entry, so these are chosen when the store opens, not by the leader.
const (
	// IndexDropEntry: the loop writes no entry for a matching message
	// whose global position is a multiple of indexDropEvery.
	IndexDropEntry byte = 1 + iota
	// IndexSkipRemoval: the loop deletes the change record of a removed
	// run whose first global position is even without dropping its
	// entries.
	IndexSkipRemoval
)

const indexDropEvery = 50

// indexDropsEntry reports that the index-drop-entry mutant drops the
// entry of global position gp.
func indexDropsEntry(mutant byte, gp int64) bool {
	return mutant == IndexDropEntry && gp%indexDropEvery == 0
}

// indexSkipsRemoval reports that the index-skip-removal mutant ignores
// the removed run starting at lo.
func indexSkipsRemoval(mutant byte, lo int64) bool {
	return mutant == IndexSkipRemoval && lo%2 == 0
}
