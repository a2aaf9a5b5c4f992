// Package rpc owns Skald's API surfaces: the skald.v1 Connect services
// (Connect, gRPC and gRPC-Web on one handler), authentication, input
// validation at the edge, error mapping, and the HTTP handler that also
// serves health, readiness, metrics, the web console and the node's peer
// service.
//
// It must never touch Pebble or Raft directly: it talks to a Backend (the
// node) and reads through fsm views the node hands it.
package rpc
