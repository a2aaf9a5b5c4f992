//go:build mutants

package fsm

// honorProposedGlobal makes apply use a leader-chosen global position
// (node's global-pos-at-propose mutant). Compiled only with -tags mutants.
const honorProposedGlobal = true
