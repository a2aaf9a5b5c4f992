package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// Methods membership uses to form and reconcile the cluster.

// HasState reports whether this node holds Raft state (it bootstrapped,
// joined, or restored): such a node never bootstraps again.
func (n *Node) HasState() bool {
	if n.raft.LastIndex() > 0 {
		return true
	}
	floor, _ := n.store.Floor()
	return floor.Index > 0
}

// BootstrapCluster bootstraps a running node that has no state with the
// given voters (every node of a bootstrap-expect group calls it with the
// same list).
func (n *Node) BootstrapCluster(servers []raft.Server) error {
	err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if errors.Is(err, raft.ErrCantBootstrap) {
		return nil // it has state already: nothing to do
	}
	return err
}

// RegisterAPIAddress records a server's API address in the replicated node
// info (for forwarding and Cluster.Status) when it differs.
func (n *Node) RegisterAPIAddress(ctx context.Context, id, apiAddr string) error {
	if cur, ok := n.store.NodeAddr(id); ok && cur == apiAddr {
		return nil
	}
	_, err := n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_SetNodeInfo{SetNodeInfo: &fsmv1.SetNodeInfo{NodeId: id, ApiAddress: apiAddr}}})
	return err
}

// ServerStats returns the Raft progress of server id (asked over the
// cluster port; this node's own when it is this node).
func (n *Node) ServerStats(ctx context.Context, id string) (lastContact time.Duration, lastTerm, lastIndex uint64, err error) {
	var s interface {
		GetLastContactNanos() int64
		GetLastTerm() uint64
		GetLastIndex() uint64
	}
	if id == n.id {
		s = n.localStats()
	} else {
		addr, ok := n.peerAddr(id)
		if !ok {
			return 0, 0, 0, fmt.Errorf("%w: %s", nodeapi.ErrUnknownServer, id)
		}
		resp, err := n.peers.stats(ctx, addr)
		if err != nil {
			return 0, 0, 0, err
		}
		s = resp
	}
	lc := time.Duration(s.GetLastContactNanos())
	if lc < 0 {
		lc = time.Duration(1<<62 - 1) // never: as stale as can be
	}
	return lc, s.GetLastTerm(), s.GetLastIndex(), nil
}

// ServerAppliedIndex returns the applied index (see AppliedIndex) of
// server id, this node's own when id is this node; 0 from a server too
// old to report it.
func (n *Node) ServerAppliedIndex(ctx context.Context, id string) (uint64, error) {
	if id == n.id {
		return n.AppliedIndex(), nil
	}
	addr, ok := n.peerAddr(id)
	if !ok {
		return 0, fmt.Errorf("%w: %s", nodeapi.ErrUnknownServer, id)
	}
	resp, err := n.peers.stats(ctx, addr)
	if err != nil {
		return 0, fmt.Errorf("node: ask %s at %s for its applied index: %w", id, addr, err)
	}
	return resp.GetAppliedIndex(), nil
}
