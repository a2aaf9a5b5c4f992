//go:build mutants

package fsm

import (
	"encoding/binary"

	"github.com/hashicorp/raft"
)

// The chaos harness's mutant leaders (node/mutant_on.go) pass what they
// decided before proposing in the Raft entry's Extensions, never in the
// replicated command: a global position they chose, and whether they
// already decided the append's client ids. Compiled only with -tags
// mutants; mutant_off.go makes both readers constant.

// MutantExtensions encodes a mutant leader's decisions for an entry.
func MutantExtensions(proposedGlobal int64, idsDecided bool) []byte {
	b := make([]byte, 9)
	binary.BigEndian.PutUint64(b, uint64(proposedGlobal))
	if idsDecided {
		b[8] = 1
	}
	return b
}

// proposedGlobal is the global position a global-pos-at-propose leader
// chose for l, 0 when none: the mutant's bug is that apply trusts it.
func proposedGlobal(l *raft.Log) int64 {
	if len(l.Extensions) != 9 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(l.Extensions))
}

// idsDecidedByLeader reports that a dedupe-at-propose leader already
// decided l's client ids: the mutant's bug is that apply skips its check.
func idsDecidedByLeader(l *raft.Log) bool {
	return len(l.Extensions) == 9 && l.Extensions[8] == 1
}
