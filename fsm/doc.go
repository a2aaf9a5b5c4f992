// Package fsm owns Skald's replicated state machine: the Raft command
// encoding, the storage engine (one Pebble DB per namespace plus _metadata),
// the key schema, apply, reads, and the snapshot primitives the node's
// snapshot store is built on.
//
// It must never know about Raft networking, HTTP or clients, nor import
// hashicorp/raft: it receives committed log entries as Entry values (node
// adapts raft.FSM onto Store), applies them deterministically, and answers
// reads from consistent Pebble snapshots. DESIGN.md beside this file
// explains the mechanisms and the trade-offs.
package fsm
