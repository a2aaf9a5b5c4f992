package node

import (
	"errors"
	"fmt"
)

// errNotLeader is the local leader path's refusal; the forwarding loop
// retries on it and the peer service reports it as FAILED_PRECONDITION.
// The errors callers see are in nodeapi.
var errNotLeader = errors.New("node: not the leader")

// errOwnerStopped ends a subscription group's dispatcher whose progress
// save failed, most often because leadership went during the save (a
// paused leader's save times out before it learns that a new leader was
// elected). It is errNotLeader to every caller: consumers attach again to
// whoever owns the group now, as after a leader change, and what was not
// saved is delivered again.
var errOwnerStopped = fmt.Errorf("%w: group owner stopped", errNotLeader)

// errRelayLost ends a consumer relayed to the leader whose stream broke
// (the leader crashed, or its connection dropped): errNotLeader to
// Node.Consume, which looks for the leader again.
var errRelayLost = fmt.Errorf("%w: relay to the leader lost", errNotLeader)
