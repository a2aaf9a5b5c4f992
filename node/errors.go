package node

import "errors"

// errNotLeader is the local leader path's refusal; the forwarding loop
// retries on it and the peer service reports it as FAILED_PRECONDITION.
// The errors callers see are in nodeapi.
var errNotLeader = errors.New("node: not the leader")
