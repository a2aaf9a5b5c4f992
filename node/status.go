package node

import (
	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/node/nodeapi"
)

// Status returns this node's Raft status.
func (n *Node) Status() nodeapi.Status {
	lid, _ := n.Leader()
	st := nodeapi.Status{
		ID: n.id, Leader: n.raft.State() == raft.Leader, LeaderID: lid,
		Term: n.raft.CurrentTerm(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.AppliedIndex(),
	}
	if !st.Leader {
		st.LastContact = n.raft.LastContact()
	}
	return st
}

// Members returns the servers of the latest Raft configuration.
func (n *Node) Members() ([]nodeapi.Member, error) {
	servers, err := n.Servers()
	if err != nil {
		return nil, err
	}
	out := make([]nodeapi.Member, len(servers))
	for i, s := range servers {
		out[i] = nodeapi.Member{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter}
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
