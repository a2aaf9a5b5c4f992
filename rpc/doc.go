// Package rpc owns Skald's API surfaces: the skald.v1 Connect services
// (Connect, gRPC and gRPC-Web on one handler), authentication, input
// validation at the edge, error mapping, and the HTTP handler that also
// serves health, readiness, metrics and the web console. The node's peer
// service is not here: it is on the node's cluster port, behind mutual TLS.
//
// It must never touch Pebble or Raft directly, nor import node (or anything
// that imports hashicorp/raft): it talks to a Backend (the node) in the
// types of node/nodeapi and fsm, and reads through fsm views the node hands
// it. Only its tests start real nodes.
package rpc
