package fsm

// Entry is one committed log entry as apply sees it. The node converts
// Raft's log entries into entries (node/statemachine.go), so fsm knows
// nothing of Raft's types; apply reads only these fields.
type Entry struct {
	Index uint64 // position in the log: entries come in increasing order
	Term  uint64
	Kind  EntryKind
	// Data is the encoded fsmv1.Command of an EntryCommand, or the encoded
	// cluster configuration of an EntryConfiguration, which fsm keeps as
	// opaque bytes (SnapshotMeta.Configuration).
	Data []byte
	// Extensions carries a mutant leader's decisions (-tags mutants,
	// mutant_on.go); normal builds ignore it.
	Extensions []byte
}

// EntryKind says what an Entry holds.
type EntryKind uint8

const (
	// EntryCommand is a replicated command: Data is an fsmv1.Command.
	EntryCommand EntryKind = iota
	// EntryConfiguration is a change of the cluster configuration: Data is
	// recorded as the latest configuration and changes nothing else.
	EntryConfiguration
	// EntryOther changes no state (the entry's index is still applied).
	EntryOther
)
