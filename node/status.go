package node

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/node/peerv1"
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

// ServerProgress returns the Raft progress of server id as it reports it
// (asked over the cluster port; this node's own when id is this node).
func (n *Node) ServerProgress(ctx context.Context, id string) (nodeapi.Progress, error) {
	var s *peerv1.StatsResponse
	if id == n.id {
		s = n.localStats()
	} else {
		addr, ok := n.peerAddr(id)
		if !ok {
			return nodeapi.Progress{}, fmt.Errorf("%w: %s", nodeapi.ErrUnknownServer, id)
		}
		var err error
		if s, err = n.peers.stats(ctx, addr); err != nil {
			return nodeapi.Progress{}, fmt.Errorf("node: ask %s at %s for its progress: %w", id, addr, err)
		}
	}
	lc := time.Duration(s.GetLastContactNanos())
	if lc < 0 {
		lc = -1
	}
	return nodeapi.Progress{LastContact: lc, Term: s.GetLastTerm(), LastIndex: s.GetLastIndex(), AppliedIndex: s.GetAppliedIndex()}, nil
}
