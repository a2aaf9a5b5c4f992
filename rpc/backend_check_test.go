package rpc

import "github.com/skalddb/skald/node"

var _ Backend = (*node.Node)(nil)
