// Package node owns one cluster member: hashicorp/raft set up over
// raft-wal (or raft-boltdb) and a TCP transport, the snapshot store over the state
// machine, leader forwarding, read consistency levels, the change feed for
// subscribers, and the node-to-node (peer) service.
//
// It must never talk to clients directly or parse their input: rpc/ does
// that and calls Node. It must never touch Pebble keys: fsm/ does that. It
// keeps hashicorp/raft to itself: the types its callers share live in
// node/nodeapi, the raft.FSM adapter onto fsm.Store is statemachine.go, and
// no method hands out the *raft.Raft.
// DESIGN.md beside this file explains the mechanisms.
package node
