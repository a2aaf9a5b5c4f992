//go:build mutants

package fsm

// honorProposedGlobal makes apply use a leader-chosen global position
// (node's global-pos-at-propose mutant). Compiled only with -tags mutants.
const honorProposedGlobal = true

// trustLeaderDedupe makes apply skip the id check of an append the leader
// marked as decided (node's dedupe-at-propose mutant).
const trustLeaderDedupe = true

// expiryMutants makes expiry honour ExpireMessages.mutant_one_too_many
// and mutant_age_early (node's expire-one-too-many and expire-age-early
// mutants): one message more than the limits allow is removed, or age
// limits count as half as long.
const expiryMutants = true
