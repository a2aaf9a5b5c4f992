//go:build !mutants

package node

// MutantsBuilt reports whether this binary carries the mutants (see
// mutant.go): never in a normal build.
const MutantsBuilt = false
