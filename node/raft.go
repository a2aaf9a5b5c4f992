package node

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
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

// openTransport starts the Raft TCP transport (see transport for the
// heartbeat fast path it leaves out).
func openTransport(cfg Config, addrs *addressBook) (transport, error) {
	var advertise net.Addr
	if cfg.RaftAdvertise != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertise)
		if err != nil {
			return transport{}, fmt.Errorf("node: raft advertise address %q: %w", cfg.RaftAdvertise, err)
		}
		advertise = a
	}
	tc := &raft.NetworkTransportConfig{
		ServerAddressProvider: addrs,
		Logger:                hclogFor(cfg.Logger, "raft-net"),
		MaxPool:               3,
		// 1 turns off pipelined replication: one AppendEntries in
		// flight per follower. hashicorp/raft's pipeline (v1.7.3) can
		// deadlock once a follower answers Success=false: its decoder
		// parks on an unbuffered channel nobody reads while the sender
		// parks handing it the next request, so that follower never
		// gets another entry and Raft.Shutdown never returns (it hung a
		// client test during a leadership transfer; grafana/pyroscope
		// #5518 traced the same race). Synchronous replication sends
		// larger batches, so it costs no CPU: make bench-ab, evdb-append
		// x64, 176 -> 170 µs per write (bench/README.md).
		MaxRPCsInFlight:         1,
		Timeout:                 10 * time.Second,
		MsgpackUseNewTimeFormat: true,
	}
	if cfg.TLS != nil {
		layer, err := newTLSStreamLayer(cfg.RaftAddr, cfg.RaftAdvertise, cfg.TLS)
		if err != nil {
			return transport{}, err
		}
		tc.Stream = layer
		return transport{raft.NewNetworkTransportWithConfig(tc)}, nil
	}
	if len(cfg.DialMap) > 0 {
		layer, err := newMappedStreamLayer(cfg.RaftAddr, advertise, cfg.DialMap)
		if err != nil {
			return transport{}, fmt.Errorf("node: raft transport on %s: %w", cfg.RaftAddr, err)
		}
		tc.Stream = layer
		return transport{raft.NewNetworkTransportWithConfig(tc)}, nil
	}
	t, err := raft.NewTCPTransportWithConfig(cfg.RaftAddr, advertise, tc)
	if err != nil {
		return transport{}, fmt.Errorf("node: raft transport on %s: %w", cfg.RaftAddr, err)
	}
	return transport{t}, nil
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
