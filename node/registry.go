package node

import "github.com/skalddb/skald/fsm"

// The registry as this node has applied it: namespaces (with their token
// hashes) and the API address of every node. These reads wait for no
// consistency level; callers that need one read through Read.

// Namespace returns the namespace called name, if this node has applied
// its creation (and not its deletion).
func (n *Node) Namespace(name string) (fsm.NamespaceInfo, bool) { return n.store.Namespace(name) }

// Namespaces returns every namespace this node has applied, by name.
func (n *Node) Namespaces() []fsm.NamespaceInfo { return n.store.Namespaces() }

// NodeAddr returns the API address server id registered, if any.
func (n *Node) NodeAddr(id string) (string, bool) { return n.store.NodeAddr(id) }

// NodeAddrs returns the API address of every server that registered one.
func (n *Node) NodeAddrs() map[string]string { return n.store.Nodes() }
