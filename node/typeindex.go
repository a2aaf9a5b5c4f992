package node

import (
	"context"
	"fmt"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// The type index of every message (fsm/typeindex.go) changes what a
// condition of types alone decides, so a replica that does not know it
// would decide otherwise and diverge. The leader therefore proposes what
// depends on it, a namespace created with its index complete
// (CreateNamespace.index_all_types) and the IndexTypes entries that bring
// an older namespace up, only once every server of the configuration,
// voters and non-voters alike, is known to apply that version (the
// version gate, version.go: what each server last reported). A server not
// known to, that has no record and does not answer, counts as too old: a
// namespace created meanwhile starts legacy, and the backfill brings it up
// once the gate passes.

// typeIndexLoop brings the type index of every namespace whose index is not
// complete up to every message, while this node leads and every server
// knows the index: one IndexTypes entry at a time (each walks at most
// fsm.DefaultIndexTypesBatch messages), spaced by twice the time the last
// one took, so that a backfill takes at most about a third of the apply
// loop from client writes. It looks every Config.TypeIndexInterval.
func (n *Node) typeIndexLoop() { n.everyTickAsLeader(n.cfg.TypeIndexInterval, n.typeIndexRound) }

// typeIndexRound is one tick of the backfill loop.
func (n *Node) typeIndexRound() {
	pending := n.store.TypeIndexPending()
	if len(pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(n.life, n.cfg.TypeIndexInterval)
	ready := n.serversKnow(ctx, 1)
	cancel()
	if !ready {
		n.log.Debug("type index backfill waits: a server does not report the type index", "namespaces", len(pending))
		return
	}
	for _, ns := range pending {
		for done := false; !done; {
			start := time.Now()
			ctx, cancel := context.WithTimeout(n.life, n.cfg.ApplyTimeout)
			res, err := n.indexTypesLocal(ctx, ns)
			cancel()
			if err != nil {
				n.log.Debug("type index backfill not applied", "namespace", ns, "err", err)
				break
			}
			if done = res.Complete; done {
				n.log.Info("type index complete: queries of types see every message", "namespace", ns)
			}
			select {
			case <-n.closing:
				return
			case <-time.After(2 * time.Since(start)):
			}
		}
	}
}

// IndexTypesNow proposes one IndexTypes entry for namespace (the backfill
// loop's step, for tests and tools); it must run on the leader.
func (n *Node) IndexTypesNow(ctx context.Context, namespace string) (*fsmv1.IndexTypesResult, error) {
	return n.indexTypesLocal(ctx, namespace)
}

// indexTypesLocal proposes an IndexTypes entry only on this node, as the
// leader: a follower never forwards one (the leader runs its own loop).
func (n *Node) indexTypesLocal(ctx context.Context, namespace string) (*fsmv1.IndexTypesResult, error) {
	res, err := n.applyLocal(ctx, &fsmv1.Command{Kind: &fsmv1.Command_IndexTypes{IndexTypes: &fsmv1.IndexTypes{
		Namespace: namespace, MaxKeys: fsm.DefaultIndexTypesBatch,
	}}})
	if err != nil {
		return nil, err
	}
	r := res.GetIndexTypes()
	if r == nil {
		return nil, fmt.Errorf("node: unexpected result %v for an IndexTypes entry", res)
	}
	return r, nil
}
