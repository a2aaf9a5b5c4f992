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

// Progress is a server's Raft progress as the server itself reports it
// (the peer Stats call), for Cluster.Status and health.
type Progress struct {
	// LastContact is the time since the server last heard from its
	// leader: 0 on the leader, negative when it never did.
	LastContact time.Duration
	// Term is the server's current term; LastIndex its last log entry;
	// AppliedIndex the last entry whose effects its reads see (0 from a
	// server too old to say).
	Term, LastIndex, AppliedIndex uint64
}

// HealthRule is autopilot's health rule: a server is healthy when it
// answers, has heard from the leader within LastContactThreshold (the
// leader itself always has), is in the leader's term, and its log is at
// most MaxTrailingLogs entries behind the leader's. Zero fields mean
// autopilot's defaults, 10 s and 1000.
type HealthRule struct {
	LastContactThreshold time.Duration
	MaxTrailingLogs      uint64
}

// Healthy judges server p against its leader's progress, as autopilot
// judges every server on the leader (raft-autopilot's isHealthy, but for
// gossip's alive status: a server that reported its progress is alive).
func (r HealthRule) Healthy(p, leader Progress) bool {
	threshold, trailing := r.LastContactThreshold, r.MaxTrailingLogs
	if threshold == 0 {
		threshold = 10 * time.Second
	}
	if trailing == 0 {
		trailing = 1000
	}
	switch {
	case leader.LastIndex == 0 || leader.Term == 0:
		return false // no log yet: nothing is healthy
	case p.LastContact < 0 || p.LastContact > threshold:
		return false
	case p.Term != leader.Term:
		return false
	}
	return p.LastIndex+trailing >= leader.LastIndex
}
