package node

import (
	"time"

	"github.com/hashicorp/raft"
)

// Status is a point-in-time view of this node's part in the Raft group,
// for status endpoints and operators. Reading it changes nothing.
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

// Status returns this node's Raft status.
func (n *Node) Status() Status {
	lid, _ := n.Leader()
	st := Status{
		ID: n.id, Leader: n.raft.State() == raft.Leader, LeaderID: lid,
		Term: n.raft.CurrentTerm(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.AppliedIndex(),
	}
	if !st.Leader {
		st.LastContact = n.raft.LastContact()
	}
	return st
}

// Member is one server of the Raft configuration.
type Member struct {
	ID       string
	RaftAddr string
	Voter    bool // a voter, not a non-voter catching up
}

// Members returns the servers of the latest Raft configuration.
func (n *Node) Members() ([]Member, error) {
	servers, err := n.Servers()
	if err != nil {
		return nil, err
	}
	out := make([]Member, len(servers))
	for i, s := range servers {
		out[i] = Member{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter}
	}
	return out, nil
}

// Servers returns the latest Raft configuration in Raft's own terms, for
// membership, which changes it; everything else reads Members.
func (n *Node) Servers() ([]raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}
