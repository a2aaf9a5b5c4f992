package node

import (
	"errors"
	"fmt"
)

// errNotLeader is the local leader path's refusal; the forwarding loop
// retries on it and the peer service reports it as FAILED_PRECONDITION.
// The errors callers see are in nodeapi.
var errNotLeader = errors.New("node: not the leader")

// errRelayLost ends a consumer relayed to the leader whose stream broke
// (the leader crashed, or its connection dropped): errNotLeader to
// Node.Consume, which looks for the leader again.
var errRelayLost = fmt.Errorf("%w: relay to the leader lost", errNotLeader)
