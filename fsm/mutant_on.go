//go:build mutants

package fsm

// honorProposedGlobal makes apply use a leader-chosen global position
// (node's global-pos-at-propose mutant). Compiled only with -tags mutants.
const honorProposedGlobal = true

// trustLeaderDedupe makes apply skip the id check of an append the leader
// marked as decided (node's dedupe-at-propose mutant).
const trustLeaderDedupe = true

// trustLeaderCondition makes apply skip the condition of an append the
// leader marked as decided (node's condition-at-propose mutant).
const trustLeaderCondition = true
