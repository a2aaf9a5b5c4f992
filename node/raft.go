package node

import (
	"errors"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/node/transport"
)

// raftConfig builds the Raft configuration from cfg: Consul's and Vault's
// production values for a LAN, except where node/DESIGN.md says why not.
func raftConfig(cfg Config, id string, notify chan bool) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(id)
	c.HeartbeatTimeout = cfg.Timing.HeartbeatTimeout
	c.ElectionTimeout = cfg.Timing.ElectionTimeout
	c.LeaderLeaseTimeout = cfg.Timing.LeaderLeaseTimeout
	c.CommitTimeout = cfg.Timing.CommitTimeout
	c.MaxAppendEntries = 64
	c.BatchApplyCh = true
	c.SnapshotThreshold = cfg.SnapshotThreshold
	c.SnapshotInterval = cfg.SnapshotInterval
	c.TrailingLogs = cfg.TrailingLogs
	// The snapshot store lists the fsm durable floor, which Pebble already
	// holds: nothing to restore at start, replay from the floor.
	c.NoSnapshotRestoreOnStart = true
	c.ShutdownOnRemove = false
	c.NoLegacyTelemetry = true
	c.NotifyCh = notify
	c.Logger = hclogFor(cfg.Logger, "raft")
	return c
}

// openTransport starts Raft's transport over the cluster port.
func openTransport(cfg Config, addrs *addressBook, port *transport.Port) *transport.Raft {
	return transport.OpenRaft(port, transport.RaftOptions{
		Addrs: addrs, NetLog: hclogFor(cfg.Logger, "raft-net"), Log: cfg.Logger, MsgpackOnly: cfg.olderRaftFraming,
	})
}

// clusterCredsFor returns the credentials of the cluster port: the
// operator's certificates when cfg.TLS is set, else ones derived from the
// cluster secret.
func clusterCredsFor(cfg Config, nodeID string) (transport.Creds, error) {
	if cfg.TLS != nil {
		return transport.FileCreds(cfg.TLS), nil
	}
	return transport.NewSecretCreds(cfg.ClusterSecret, nodeID)
}

// addressBook maps server ids to their current Raft address (fed by
// membership), so a server whose address changed stays reachable before
// the configuration is rewritten. Unknown ids fall back to the address in
// the configuration.
type addressBook struct {
	mu    sync.RWMutex
	addrs map[raft.ServerID]raft.ServerAddress
}

func newAddressBook() *addressBook {
	return &addressBook{addrs: make(map[raft.ServerID]raft.ServerAddress)}
}

// ServerAddr implements raft.ServerAddressProvider.
func (b *addressBook) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if a, ok := b.addrs[id]; ok {
		return a, nil
	}
	return "", errNoAddress
}

// errNoAddress makes the transport use the configuration's address. It is
// one value, not a formatted error: Raft asks for its own id's address on
// every AppendEntries it sends or answers.
var errNoAddress = errors.New("node: no address reported for this server")

func (b *addressBook) set(id raft.ServerID, addr raft.ServerAddress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if addr == "" {
		delete(b.addrs, id)
		return
	}
	b.addrs[id] = addr
}

// leaderPeer returns the cluster-port address of the leader when another
// node leads: the address membership reported for it, else the one Raft
// learned with its leadership.
func (n *Node) leaderPeer() (string, bool) {
	addr, lid := n.raft.LeaderWithID()
	if lid == "" || string(lid) == n.id {
		return "", false
	}
	if a, err := n.addrs.ServerAddr(lid); err == nil {
		return string(a), true
	}
	return string(addr), addr != ""
}

// peerAddr returns the cluster-port address of server id, as
// serverAddr does, from the latest configuration.
func (n *Node) peerAddr(id string) (string, bool) {
	servers, err := n.Servers()
	if err != nil {
		return "", false
	}
	for _, s := range servers {
		if string(s.ID) == id {
			return n.serverAddr(s), true
		}
	}
	return "", false
}

// serverAddr returns the cluster-port address of s: the address
// membership reported for it, else the one in the configuration.
func (n *Node) serverAddr(s raft.Server) string {
	if a, err := n.addrs.ServerAddr(s.ID); err == nil {
		return string(a)
	}
	return string(s.Address)
}
