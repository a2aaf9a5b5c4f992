package node

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// SetRetentionPolicy is Apply for a retention policy change.
func (n *Node) SetRetentionPolicy(ctx context.Context, c *fsmv1.SetRetentionPolicy) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_SetRetentionPolicy{SetRetentionPolicy: c}})
}

// ExpireNow proposes one ExpireMessages entry for namespace at the
// leader's clock (the expiry loop's step, also for tests and tools).
func (n *Node) ExpireNow(ctx context.Context, namespace string) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_ExpireMessages{ExpireMessages: &fsmv1.ExpireMessages{
		Namespace: namespace, MaxMessages: fsm.DefaultExpireBatch,
	}}})
}

// expiryLoop proposes, while this node leads, one ExpireMessages entry per
// namespace with retention policies every Config.RetentionInterval. The
// entry carries the leader's clock (stamp), and apply decides from it, so
// every replica removes the same messages whenever it applies the entry.
// An entry that stopped at its bound is followed at once by the next.
func (n *Node) expiryLoop() { n.everyTickAsLeader(n.cfg.RetentionInterval, n.expireRound) }

// expireRound is one tick of the expiry loop.
func (n *Node) expireRound() {
	for _, ns := range n.store.RetainedNamespaces() {
		for more := true; more; {
			more = false
			ctx, cancel := context.WithTimeout(n.life, n.cfg.ApplyTimeout)
			res, err := n.expireLocal(ctx, ns)
			cancel()
			if err != nil {
				n.log.Debug("expiry not applied", "namespace", ns, "err", err)
				break
			}
			if res.MessagesDeleted > 0 {
				n.m.expired.Add(float64(res.MessagesDeleted))
				n.log.Debug("expired messages", "namespace", ns, "messages", res.MessagesDeleted, "streams", res.Streams)
			}
			select {
			case <-n.closing:
				return
			default:
			}
			more = res.More
		}
	}
}

// everyTickAsLeader calls round every interval while this node leads,
// until the node closes (never when interval < 0). It is a loop of the
// node's (see every). A round watches n.closing itself when it may run
// long.
func (n *Node) everyTickAsLeader(interval time.Duration, round func()) {
	n.every(interval, nil, func() {
		if n.raft.State() == raft.Leader {
			round()
		}
	})
}

// every calls round every interval, and at once whenever kick (nil:
// never) fires, until the node closes; when interval < 0, never. It is a
// loop of the node's: it calls n.wg.Done when it returns.
func (n *Node) every(interval time.Duration, kick <-chan struct{}, round func()) {
	defer n.wg.Done()
	if interval < 0 {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-n.closing:
			return
		case <-tick.C:
		case <-kick:
		}
		round()
	}
}

// expireLocal proposes an expiry only on this node, as the leader: a
// follower never forwards one (the leader runs its own loop).
func (n *Node) expireLocal(ctx context.Context, namespace string) (*fsmv1.ExpiryResult, error) {
	res, err := n.applyLocal(ctx, &fsmv1.Command{Kind: &fsmv1.Command_ExpireMessages{ExpireMessages: &fsmv1.ExpireMessages{
		Namespace: namespace, MaxMessages: fsm.DefaultExpireBatch,
	}}})
	if err != nil {
		return nil, err
	}
	r := res.GetExpiry()
	if r == nil {
		return nil, fmt.Errorf("node: unexpected result %v for an expiry", res)
	}
	return r, nil
}
