package nodeapi

import "time"

// Consistency is the guarantee a read asks for (docs/architecture.md §6).
type Consistency int

const (
	// Linearizable reads see every write acknowledged before the read
	// began, on any node. The default.
	Linearizable Consistency = iota
	// Session reads see at least the writes up to ReadOptions.MinIndex
	// (the index a write reply carried).
	Session
	// Local reads see whatever this node has applied; with MaxStaleness
	// they fail when the leader has not been heard from for that long.
	Local
)

// ReadOptions selects a read's consistency.
type ReadOptions struct {
	Consistency  Consistency
	MinIndex     uint64        // Session
	MaxStaleness time.Duration // Local; 0 means no bound
}
