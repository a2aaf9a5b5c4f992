package transport

import (
	"log/slog"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// RaftOptions configure the Raft transport over a cluster port.
type RaftOptions struct {
	// Addrs gives servers' current addresses; an error falls back to the
	// address in Raft's configuration.
	Addrs raft.ServerAddressProvider
	// NetLog is hashicorp/raft's NetworkTransport logger.
	NetLog hclog.Logger
	// Log is the binary wire's logger (nil: discard).
	Log *slog.Logger
	// MsgpackOnly speaks Raft as the version before skald-raft/2 did:
	// hashicorp/raft's framing only, skald-raft/2 neither offered nor
	// dialed.
	MsgpackOnly bool
}

// OpenRaft starts Raft's network transport over port (see Raft for the
// heartbeat fast path it leaves out), with AppendEntries in skald-raft/2's
// binary framing to the peers that speak it (wire.go). Closing it closes
// the port.
func OpenRaft(port *Port, o RaftOptions) *Raft {
	tc := &raft.NetworkTransportConfig{
		ServerAddressProvider: o.Addrs,
		Stream:                port,
		Logger:                o.NetLog,
		MaxPool:               3,
		// 1 turns off pipelined replication: one AppendEntries in
		// flight per follower. hashicorp/raft's pipeline (v1.7.3) can
		// deadlock once a follower answers Success=false: its decoder
		// parks on an unbuffered channel nobody reads while the sender
		// parks handing it the next request, so that follower never
		// gets another entry and Raft.Shutdown never returns
		// (grafana/pyroscope#5518 traced the same race). Synchronous
		// replication sends larger batches, so it costs no CPU
		// (bench/README.md).
		MaxRPCsInFlight:         1,
		Timeout:                 10 * time.Second,
		MsgpackUseNewTimeFormat: true,
	}
	nt := raft.NewNetworkTransportWithConfig(tc)
	if o.MsgpackOnly {
		return &Raft{NetworkTransport: nt}
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	wire := newBinaryWire(port, o.Addrs, tc.Timeout, log.With("component", "raft-wire"))
	wire.start(nt.Consumer())
	return &Raft{NetworkTransport: nt, wire: wire}
}

// Raft is the Raft network transport without hashicorp/raft's heartbeat
// fast path.
//
// With the fast path, the transport's goroutine answers a heartbeat by
// running appendEntries itself, and a heartbeat from a newer leader moves
// currentTerm and the state to follower behind the back of the main loop
// (hashicorp/raft#695, open in v1.7.3). A leader idle in its select takes
// the next proposal, reads the new term and writes the entry with it: the
// entry then shares index and term with the real leader's entry at that
// index, Raft never replaces it, and the old leader applies a write no
// other node has. node's TestStaleLeaderNeverWritesNewerTerm replays
// that.
//
// INVARIANT: every change of term and role happens on Raft's main
// goroutine. Heartbeats therefore queue with the other RPCs. What that
// costs: a follower busy with a log write answers a heartbeat after it,
// and one stalled past the heartbeat timeout may start a pre-vote, which
// the others refuse while they hear from the leader.
//
// AppendEntries goes over wire (skald-raft/2, wire.go) to every peer
// that speaks it, else through NetworkTransport; wire, when set, also
// owns the Consumer channel both feed.
type Raft struct {
	*raft.NetworkTransport
	wire *binaryWire // nil: hashicorp/raft's framing only
}

// AppendEntries implements raft.Transport.
func (t *Raft) AppendEntries(
	id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse,
) error {
	if t.wire != nil {
		if ok, err := t.wire.appendEntries(id, target, args, resp); ok {
			return err
		}
	}
	return t.NetworkTransport.AppendEntries(id, target, args, resp)
}

// Consumer implements raft.Transport: the RPCs of both framings.
func (t *Raft) Consumer() <-chan raft.RPC {
	if t.wire != nil {
		return t.wire.consume
	}
	return t.NetworkTransport.Consumer()
}

// Close implements raft.WithClose: the wire's connections, then
// NetworkTransport's, which closes the port.
func (t *Raft) Close() error {
	if t.wire != nil {
		t.wire.close()
	}
	err := t.NetworkTransport.Close()
	if t.wire != nil {
		t.wire.wait()
	}
	return err
}

// SetHeartbeatHandler implements raft.Transport. It drops the handler, so
// heartbeats reach the main loop through Consumer like any other RPC.
func (*Raft) SetHeartbeatHandler(func(raft.RPC)) {}

// Binary reports whether the transport speaks skald-raft/2.
func (t *Raft) Binary() bool { return t.wire != nil }

// BinaryServed returns how many AppendEntries requests it answered over
// skald-raft/2.
func (t *Raft) BinaryServed() uint64 {
	if t.wire == nil {
		return 0
	}
	return t.wire.served.Load()
}

// LegacyPeers returns how many peers it holds as speaking only
// hashicorp/raft's framing, rechecked or not.
func (t *Raft) LegacyPeers() int {
	if t.wire == nil {
		return 0
	}
	t.wire.mu.Lock()
	defer t.wire.mu.Unlock()
	return len(t.wire.legacy)
}
