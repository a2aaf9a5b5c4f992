// Package transport is the cluster port: the one listener of node-to-node
// traffic, and Raft's transport on it.
//
// It owns the listener (Port), which tells Raft's RPCs from the peer
// service by ALPN; the bounds on connections still handshaking and the
// slots reserved for members' addresses; the cluster's credentials
// (derived from the cluster secret, or the operator's certificate files)
// and the TLS configurations built from them; hashicorp/raft's
// StreamLayer; and Raft's transport (Raft), which carries AppendEntries in
// Skald's own binary framing (skald-raft/2) to the peers that speak it and
// everything else in hashicorp/raft's msgpack framing (skald-raft/1).
//
// The node constructs it and wires it: it opens the port, gives it to Raft,
// serves the peer service's handler on it, and reports the servers it
// knows through Members.
//
// INVARIANTS:
//   - No byte of a connection reaches Raft or the peer service before its
//     TLS handshake has verified the peer's certificate against the
//     cluster CA; a connection that fails is closed and counted.
//   - The ALPN names, the bytes of both framings, the metric names and the
//     log lines are a contract with the other members, of this release and
//     the one before: a rolling upgrade mixes them.
//   - Every change of Raft's term and role stays on Raft's main goroutine:
//     the transport never answers a heartbeat itself.
//   - It never imports node, fsm, rpc or membership: it knows nothing of
//     what the connections carry beyond Raft's RPCs.
package transport
