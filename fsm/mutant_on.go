//go:build mutants

package fsm

// honorProposedGlobal makes apply use a leader-chosen global position
// (node's global-pos-at-propose mutant). Compiled only with -tags mutants.
const honorProposedGlobal = true

// trustLeaderDedupe makes apply skip the id check of an append the leader
// marked as decided (node's dedupe-at-propose mutant).
const trustLeaderDedupe = true

// expireOneTooMany makes expiry honour ExpireMessages.mutant_one_too_many
// (node's expire-one-too-many mutant): one message more than the limits
// allow is removed.
const expireOneTooMany = true
