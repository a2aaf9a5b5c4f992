package node

import (
	"context"
	"errors"
	"time"

	"github.com/skalddb/skald/node/nodeapi"
)

// leaderCall is one call that only the leader may serve, made from any
// node: here while this node leads, else through the leader's peer
// service, again and again until one of them answers, or no leader
// appeared within Config.LeaderWait, or ctx ends.
//
// INVARIANT: local and remote return errNotLeader or errNotSent only when
// the call certainly did nothing, so trying again (here or elsewhere)
// cannot do it twice. Anything else they return is the call's answer.
type leaderCall struct {
	local  func() error
	remote func(ctx context.Context, addr string) error
	// renew, when set, is asked after each round that found no leader to
	// serve the call; true restarts the wait (a consumer that was served
	// until leadership moved looks for the new leader as long as a fresh
	// call would).
	renew func() bool
	// noLeader builds the error when the wait ends; nil:
	// nodeapi.ErrNoLeader.
	noLeader func() error
}

// callLeader runs c (see leaderCall).
func (n *Node) callLeader(ctx context.Context, c leaderCall) error {
	deadline := time.Now().Add(n.cfg.LeaderWait)
	for attempt := 0; ; attempt++ {
		err := c.local()
		if !errors.Is(err, errNotLeader) {
			return err
		}
		if addr, ok := n.leaderPeer(); ok {
			err := c.remote(ctx, addr)
			if !errors.Is(err, errNotLeader) && !errors.Is(err, errNotSent) {
				return err
			}
		}
		if c.renew != nil && c.renew() {
			deadline, attempt = time.Now().Add(n.cfg.LeaderWait), 0
		}
		if time.Now().After(deadline) {
			if c.noLeader != nil {
				return c.noLeader()
			}
			return nodeapi.ErrNoLeader
		}
		if err := n.sleepCtx(ctx, backoff(attempt)); err != nil {
			return err // nothing was done
		}
	}
}

func backoff(attempt int) time.Duration {
	return min(time.Duration(attempt+1)*10*time.Millisecond, 200*time.Millisecond)
}
