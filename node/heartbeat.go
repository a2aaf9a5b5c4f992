package node

import "github.com/hashicorp/raft"

// transport is the Raft network transport without hashicorp/raft's
// heartbeat fast path.
//
// With the fast path, the transport's goroutine answers a heartbeat by
// running appendEntries itself, and a heartbeat from a newer leader moves
// currentTerm and the state to follower behind the back of the main loop
// (hashicorp/raft#695, open in v1.7.3). A leader idle in its select takes
// the next proposal, reads the new term and writes the entry with it: the
// entry then shares index and term with the real leader's entry at that
// index, Raft never replaces it, and the old leader applies a write no
// other node has. A 5-node jepsen campaign (pause nemesis) caught exactly
// that; TestStaleLeaderNeverWritesNewerTerm replays it.
//
// INVARIANT: every change of term and role happens on Raft's main
// goroutine. Heartbeats therefore queue with the other RPCs. What that
// costs: a follower busy with a log write answers a heartbeat after it,
// and one stalled past the heartbeat timeout may start a pre-vote, which
// the others refuse while they hear from the leader.
//
// AppendEntries goes over wire (skald-raft/2, raftwire.go) to every peer
// that speaks it, else through NetworkTransport; wire, when set, also
// owns the Consumer channel both feed.
type transport struct {
	*raft.NetworkTransport
	wire *binaryWire // nil: hashicorp/raft's framing only
}

// AppendEntries implements raft.Transport.
func (t transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if t.wire != nil {
		if ok, err := t.wire.appendEntries(id, target, args, resp); ok {
			return err
		}
	}
	return t.NetworkTransport.AppendEntries(id, target, args, resp)
}

// Consumer implements raft.Transport: the RPCs of both framings.
func (t transport) Consumer() <-chan raft.RPC {
	if t.wire != nil {
		return t.wire.consume
	}
	return t.NetworkTransport.Consumer()
}

// Close implements raft.WithClose: the wire's connections, then
// NetworkTransport's, which closes the port.
func (t transport) Close() error {
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
func (transport) SetHeartbeatHandler(func(raft.RPC)) {}
