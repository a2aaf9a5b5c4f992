//go:build mutants

package fsm

import (
	"encoding/binary"

	"github.com/hashicorp/raft"
)

// The chaos harness's mutant leaders (node/mutant_on.go) pass what they
// decided before proposing in the Raft entry's Extensions, never in the
// replicated command: a global position they chose, whether they already
// decided the append's client ids, and how an expiry entry must go wrong.
// Compiled only with -tags mutants; mutant_off.go makes every reader
// constant.
//
// Layout: 8 bytes of proposed global position, then a byte of flags.
const (
	mutantIDsDecided       = 1 << iota // dedupe-at-propose
	mutantExpireOneTooMany             // expire-one-too-many
	mutantExpireAgeEarly               // expire-age-early
)

// MutantExtensions encodes a mutant leader's decisions for an entry.
func MutantExtensions(proposedGlobal int64, idsDecided bool) []byte {
	b := make([]byte, 9)
	binary.BigEndian.PutUint64(b, uint64(proposedGlobal))
	if idsDecided {
		b[8] = mutantIDsDecided
	}
	return b
}

// MutantExpiryExtensions marks an ExpireMessages entry of a mutant leader:
// oneTooMany removes one position more than the limits allow, ageEarly
// counts age limits as half as long.
func MutantExpiryExtensions(oneTooMany, ageEarly bool) []byte {
	b := make([]byte, 9)
	if oneTooMany {
		b[8] |= mutantExpireOneTooMany
	}
	if ageEarly {
		b[8] |= mutantExpireAgeEarly
	}
	return b
}

func mutantFlags(l *raft.Log) byte {
	if len(l.Extensions) != 9 {
		return 0
	}
	return l.Extensions[8]
}

// expireOneTooMany and expireAgeEarly report an expiry mutant's bug for
// entry l.
func expireOneTooMany(l *raft.Log) bool { return mutantFlags(l)&mutantExpireOneTooMany != 0 }

func expireAgeEarly(l *raft.Log) bool { return mutantFlags(l)&mutantExpireAgeEarly != 0 }

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
	return mutantFlags(l)&mutantIDsDecided != 0
}
