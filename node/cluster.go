package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
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
// info (for forwarding and Cluster.Status) when it differs. The entry
// keeps the server's recorded version; a server registered for the first
// time has its version recorded next (version.go).
func (n *Node) RegisterAPIAddress(ctx context.Context, id, apiAddr string) error {
	n.nodeInfoMu.Lock()
	defer n.nodeInfoMu.Unlock()
	if cur, ok := n.store.NodeAddr(id); ok && cur == apiAddr {
		return nil
	}
	_, err := n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_SetNodeInfo{SetNodeInfo: &fsmv1.SetNodeInfo{NodeId: id, ApiAddress: apiAddr}}})
	if err == nil {
		n.kickVersions()
	}
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

// RemoveServer removes server id from the Raft configuration, on the
// leader or through it (waiting up to LeaderWait for one). It returns once
// the change is committed. An id the leader's configuration does not hold
// is refused with nodeapi.ErrUnknownServer (wrapped, naming the id) and
// nothing is proposed; hashicorp/raft would otherwise commit an unchanged
// configuration and report success. The one exception is this node's own
// id: a node that is no longer in the configuration has left already (a
// cut-off node autopilot removed, or a Leave whose first reply was lost),
// so the removal answers nil and membership's Leave stays idempotent.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	err := n.removeServer(ctx, id)
	if id == n.id && errors.Is(err, nodeapi.ErrUnknownServer) {
		return nil
	}
	return err
}

func (n *Node) removeServer(ctx context.Context, id string) error {
	return n.callLeader(ctx, leaderCall{
		local:  func() error { return n.removeServerLocal(ctx, id) },
		remote: func(ctx context.Context, addr string) error { return n.peers.removeServer(ctx, addr, id) },
	})
}

// removeServerLocal removes id on this node, which must lead. The check
// reads the latest configuration the leader holds (committed or not);
// configuration changes are serialized by hashicorp/raft, so a concurrent
// change can at worst make a just-added id refused or a just-removed one
// removed again (a no-op), never remove another server.
func (n *Node) removeServerLocal(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		return errNotLeader
	}
	cf := n.raft.GetConfiguration()
	if err := waitFuture(ctx, cf); err != nil {
		return fmt.Errorf("node: read the Raft configuration: %w", err)
	}
	if !hasServer(cf.Configuration(), id) {
		return fmt.Errorf("%w: %q", nodeapi.ErrUnknownServer, id)
	}
	if err := n.configChange(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout)); err != nil {
		return err
	}
	if f := n.removals.Load(); f != nil {
		(*f)(id)
	}
	return nil
}

// NotifyRemovals makes f hear of every server this node removes from the
// configuration as leader, once the removal is committed, whoever asked
// for it (a leave arrives here from the leaving node): membership tells
// a leave from a failure with it, even on a leader too new to have seen
// the server in its configuration. f must not block. One listener; a
// later call replaces it.
func (n *Node) NotifyRemovals(f func(id string)) { n.removals.Store(&f) }

// hasServer reports whether cfg holds server id (voter or not).
func hasServer(cfg raft.Configuration, id string) bool {
	for _, s := range cfg.Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// stateMachineVersion is the version this node reports to its peers
// (fsm.StateMachineVersion, or a test's older one).
func (n *Node) stateMachineVersion() uint32 {
	if n.cfg.olderStateMachine {
		return fsm.StateMachineVersion - 1
	}
	return fsm.StateMachineVersion
}

// admit refuses to add server id at raftAddr to the configuration when it
// is new to it and its state machine is older than this leader's, or it
// does not say. Commands that need a version are proposed only while
// every server is known to apply it (the version gate, version.go), but
// a server that joins later replays them from the log or a snapshot: an
// older one would apply them otherwise and diverge. A server already in
// the configuration (a promotion, a new address) is not asked.
func (n *Node) admit(ctx context.Context, id, raftAddr string) error {
	cf := n.raft.GetConfiguration()
	if err := waitFuture(ctx, cf); err != nil {
		return fmt.Errorf("node: read the Raft configuration: %w", err)
	}
	if hasServer(cf.Configuration(), id) {
		return nil
	}
	resp, err := n.peers.stats(ctx, raftAddr)
	if err != nil {
		return fmt.Errorf("node: ask joining server %q at %s for its version: %w", id, raftAddr, err)
	}
	if v, want := resp.GetStateMachineVersion(), n.stateMachineVersion(); v < want {
		return fmt.Errorf("%w: server %q runs state machine version %d, the leader %d: upgrade it before it joins", ErrJoinerTooOld, id, v, want)
	}
	return nil
}

// ErrJoinerTooOld refuses a server whose state machine is older than the
// leader's (admit). Nothing was changed; it joins once upgraded.
var ErrJoinerTooOld = errors.New("node: joining server runs an older version")
