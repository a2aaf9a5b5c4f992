//go:build !mutants

package node

// MutantsBuilt reports whether this binary carries the mutants (see
// mutant.go): never in a normal build.
const MutantsBuilt = false

// installMutant does nothing in a normal build: the hooks stay nil.
func (n *Node) installMutant() {}

// indexMutant is 0 in a normal build: the index loop has no mutant.
func indexMutant(string) byte { return 0 }
