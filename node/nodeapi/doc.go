// Package nodeapi is the vocabulary a node offers its callers: read
// consistency levels and options, the sentinel errors, the status and
// membership views, subscription-group deliveries and settle actions, and
// the change feed that wakes subscribers. node implements the calls that
// use these types; rpc and other callers speak them without importing node.
//
// It must never import hashicorp/raft (directly or through another
// package), node or rpc: it sits below both, so the API layer builds
// without Raft. Its only Skald import is fsm, for the types a result
// carries.
package nodeapi
