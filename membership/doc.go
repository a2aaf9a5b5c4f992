// Package membership forms and maintains the cluster: hashicorp/memberlist
// gossip for discovery (node id, Raft and API addresses, bootstrap-expect
// in each node's metadata), --join with retry, bootstrap-expect, the
// leader's reconciliation of gossip members into the Raft configuration,
// and raft-autopilot for promoting healthy non-voters and removing dead
// servers while quorum stays safe.
//
// It must never import Skald's other packages: it talks to the local node
// through the small Node interface.
package membership
