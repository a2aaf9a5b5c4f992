//go:build !mutants

package fsm

// honorProposedGlobal is false in normal builds: global positions are
// assigned at apply, in log order, and Append.proposed_global_position is
// ignored.
const honorProposedGlobal = false

// trustLeaderDedupe is false in normal builds: apply decides idempotent
// writes itself and ignores Append.dedupe_decided_at_propose.
const trustLeaderDedupe = false

// trustLeaderCondition is false in normal builds: apply decides append
// conditions itself and ignores AppendCondition.decided_at_propose.
const trustLeaderCondition = false
