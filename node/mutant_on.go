//go:build mutants

package node

// MutantsBuilt reports whether this binary carries the mutants (see
// mutant.go). This file is compiled only with -tags mutants.
const MutantsBuilt = true
