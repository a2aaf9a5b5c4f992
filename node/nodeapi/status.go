package nodeapi

import "time"

// Status is a point-in-time view of a node's part in the Raft group, for
// status endpoints and operators. Reading it changes nothing.
type Status struct {
	ID       string // this node's server id
	Leader   bool   // this node leads now
	LeaderID string // the leader this node knows of, "" when none
	Term     uint64
	// CommitIndex is the last entry this node knows is committed;
	// AppliedIndex the last whose effects its reads see.
	CommitIndex  uint64
	AppliedIndex uint64
	// LastContact is when a follower last heard from its leader: zero on
	// the leader and on a node that never heard one.
	LastContact time.Time
}

// Member is one server of the Raft configuration.
type Member struct {
	ID       string
	RaftAddr string
	Voter    bool // a voter, not a non-voter catching up
}
