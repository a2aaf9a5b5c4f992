package node

import (
	"context"
	"fmt"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
	peerv1 "github.com/skalddb/skald/node/peerv1"
)

// Subscription groups: the replicated commands (Apply like any write) and
// the consumer side (Consume, Settle), which the leader owns: package
// delivery delivers them there (delivery/DESIGN.md); this file finds the
// owner, here or through the peer service (grouppeer.go).

// CreateGroup is Apply for a group creation.
func (n *Node) CreateGroup(ctx context.Context, c *fsmv1.CreateGroup) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_CreateGroup{CreateGroup: c}})
}

// UpdateGroup is Apply for a change of a group's settings.
func (n *Node) UpdateGroup(ctx context.Context, c *fsmv1.UpdateGroup) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_UpdateGroup{UpdateGroup: c}})
}

// DeleteGroup is Apply for a group deletion. Its consumers' streams end
// with fsm.ErrGroupNotFound.
func (n *Node) DeleteGroup(ctx context.Context, c *fsmv1.DeleteGroup) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_DeleteGroup{DeleteGroup: c}})
}

// ReplayParked is Apply for moving parked messages back into a group.
func (n *Node) ReplayParked(ctx context.Context, c *fsmv1.ReplayParked) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_ReplayParked{ReplayParked: c}})
}

// DeleteParked is Apply for forgetting parked messages.
func (n *Node) DeleteParked(ctx context.Context, c *fsmv1.DeleteParked) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_DeleteParked{DeleteParked: c}})
}

// Consume attaches a consumer named consumer to group of namespace ns and
// calls deliver for each message handed to it, until ctx ends, deliver
// fails, the group was deleted (fsm.ErrGroupNotFound), this node shuts
// down (nodeapi.ErrShutdown), or no owner takes the consumer for
// Config.LeaderWait (nodeapi.ErrNoLeader). heartbeat is called once the
// consumer is attached, then after every idle interval
// (Config.GroupHeartbeat) so relays keep the connection alive. On a
// follower the consumer is attached to the leader through the peer
// service. When leadership moves (the leader stepped down, crashed, or
// its progress save failed) the consumer is attached to the new leader
// without returning: deliver gets again what the old owner had in flight
// or had settled without saving, with delivery numbers from 1.
func (n *Node) Consume(ctx context.Context, ns, group, consumer string,
	deliver func(nodeapi.GroupDelivery) error, heartbeat func() error) error {
	// served: an owner took the consumer (its first heartbeat says so)
	// since the deadline was set. An idle consumer is served as much as a
	// busy one.
	served := false
	counted := func(d nodeapi.GroupDelivery) error {
		served = true
		return deliver(d)
	}
	beat := func() error {
		served = true
		return heartbeat()
	}
	// Leadership moving ends the owner's side with errNotLeader
	// (wrapped when the owner's save failed, or as errRelayLost): attach again, here or through the
	// new leader.
	return n.callLeader(ctx, leaderCall{
		local: func() error { return n.groups.Consume(ctx, ns, group, consumer, counted, beat) },
		remote: func(ctx context.Context, addr string) error {
			return n.peers.groupConsume(ctx, addr, ns, group, consumer, counted, beat)
		},
		renew: func() bool {
			renew := served
			served = false
			return renew
		},
		noLeader: func() error {
			return fmt.Errorf("%w: no owner of group %q took the consumer within %v",
				nodeapi.ErrNoLeader, group, n.cfg.LeaderWait)
		},
	})
}

// Settle acknowledges (or retries, parks, skips) the delivered messages
// ids of group, all or nothing: any id not in flight fails the call with a
// *nodeapi.NotInFlightError and settles none. reason is kept with parked messages.
func (n *Node) Settle(ctx context.Context, ns, group string, ids []string, action nodeapi.SettleAction,
	reason string) error {
	return n.callLeader(ctx, leaderCall{
		local: func() error { return n.groups.Settle(ns, group, ids, action, reason) },
		remote: func(ctx context.Context, addr string) error {
			return n.peers.groupSettle(ctx, addr, &peerv1.GroupSettleRequest{
				Namespace: ns, Group: group, Ids: ids, Action: int32(action), Reason: reason,
			})
		},
	})
}

// GroupStats returns the live state of a group from its owner, the
// leader (asked through the peer service from a follower); ok is false
// when no consumer is attached or the leader cannot be asked within ctx.
func (n *Node) GroupStats(ctx context.Context, ns, group string) (nodeapi.GroupState, bool) {
	if n.owningGroups() {
		return n.groups.Stats(ns, group)
	}
	addr, ok := n.leaderPeer()
	if !ok {
		return nodeapi.GroupState{}, false
	}
	return n.peers.groupStats(ctx, addr, ns, group)
}

// owningGroups reports whether this node may own groups now: it is the
// leader and its Barrier of this term completed (its state holds every
// entry committed before the term).
func (n *Node) owningGroups() bool {
	return n.IsLeader() && n.barrierTerm.Load() == n.raft.CurrentTerm()
}

// groupHost is the node as the delivery engine sees it (delivery.Node).
type groupHost struct{ n *Node }

func (h groupHost) Owning() bool                      { return h.n.owningGroups() }
func (h groupHost) View(ns string) (*fsm.View, error) { return h.n.store.View(ns) }
func (h groupHost) Watch(ns string) *nodeapi.Watch    { return h.n.feed.Watch(ns) }

func (h groupHost) Propose(ctx context.Context, cmd *fsmv1.Command) (*fsmv1.Result, error) {
	return h.n.applyLocal(ctx, cmd)
}
