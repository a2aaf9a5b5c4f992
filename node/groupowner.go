package node

import (
	"context"
	"sync"
	"time"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// groupOwner runs, on the leader, one dispatcher per subscription group
// that has a consumer attached. A dispatcher holds the group's in-memory
// delivery state (what is in flight with whom, retry counts, timers) and
// saves progress through Raft (GroupProgress). It exists only while this
// node leads in the term whose Barrier it saw, so it starts from every
// committed save, and it stops when leadership goes: consumers then
// reconnect (through any node) to the new leader's dispatcher, which
// starts from the last checkpoint.
type groupOwner struct {
	n  *Node
	mu sync.Mutex
	// active maps namespace 0x00 group to its dispatcher. INVARIANT: a
	// dispatcher in the map has not stopped.
	active map[string]*dispatcher
	// failures maps namespace 0x00 group to the failed-delivery counts its
	// last dispatcher held when it went idle (no consumer left): the next
	// dispatcher of the group starts from them, so a message whose only
	// consumer keeps leaving is parked after max_retries like any other
	// failure. INVARIANT: a key is never in both maps. Leadership loss
	// drops them with the dispatchers.
	failures map[string]*groupFailures
}

// groupFailures is what an idle dispatcher leaves of its retry counts:
// the failed deliveries of every message it had taken back, by global
// position, for the incarnation of the group it served. Replayed parked
// messages count apart (a message may be both), for the replay version
// they were loaded at. At most what one dispatcher holds (its pending and
// retry queues), 12 bytes a message.
type groupFailures struct {
	incarnation uint64
	source      map[int64]int32
	replayVer   uint64
	replay      map[int64]int32
}

func newGroupOwner(n *Node) *groupOwner {
	return &groupOwner{n: n, active: make(map[string]*dispatcher), failures: make(map[string]*groupFailures)}
}

func ownerKey(ns, group string) string { return ns + "\x00" + group }

// leading reports whether this node may own groups now: it is the leader
// and its Barrier of this term completed (its state holds every entry
// committed before the term).
func (o *groupOwner) leading() bool {
	return o.n.IsLeader() && o.n.barrierTerm.Load() == o.n.raft.CurrentTerm()
}

// dispatcherFor returns the running dispatcher of a group, or nil.
func (o *groupOwner) dispatcherFor(ns, group string) (*dispatcher, error) {
	if !o.leading() {
		return nil, errNotLeader
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.active[ownerKey(ns, group)], nil
}

// attach adds a consumer to a group's dispatcher, starting it. Both happen
// under o.mu, so an idle dispatcher cannot stop in between.
func (o *groupOwner) attach(ns, group, name string) (*dispatcher, *groupConsumer, error) {
	if !o.leading() {
		return nil, nil, errNotLeader
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n.life.Err() != nil {
		return nil, nil, nodeapi.ErrShutdown
	}
	key := ownerKey(ns, group)
	d, ok := o.active[key]
	if !ok {
		f := o.failures[key]
		delete(o.failures, key)
		var err error
		if d, err = newDispatcher(o, ns, group, f); err != nil {
			return nil, nil, err
		}
		o.active[key] = d
		o.n.wg.Add(1)
		go d.run()
	}
	c, err := d.attach(name)
	return d, c, err
}

// remove takes d out of the registry (if it is still there).
func (o *groupOwner) remove(d *dispatcher) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.active[ownerKey(d.ns, d.name)] == d {
		delete(o.active, ownerKey(d.ns, d.name))
	}
}

// stopAll stops every dispatcher: leadership went.
func (o *groupOwner) stopAll(err error) {
	o.mu.Lock()
	ds := make([]*dispatcher, 0, len(o.active))
	for k, d := range o.active {
		ds = append(ds, d)
		delete(o.active, k)
	}
	clear(o.failures) // a later term starts counting afresh, as another leader would
	o.mu.Unlock()
	for _, d := range ds {
		d.stop(err)
	}
}

func (o *groupOwner) consume(ctx context.Context, ns, group, name string, deliver func(nodeapi.GroupDelivery) error, heartbeat func() error) error {
	d, c, err := o.attach(ns, group, name)
	if err != nil {
		return err
	}
	defer d.detach(c)
	// A first heartbeat says the consumer is attached (and makes HTTP
	// relays and clients see the stream's headers at once).
	if err := heartbeat(); err != nil {
		return err
	}
	idle := time.NewTimer(o.n.cfg.GroupHeartbeat)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.done:
			return d.err
		case <-idle.C:
			if err := heartbeat(); err != nil {
				return err
			}
			idle.Reset(o.n.cfg.GroupHeartbeat)
		case <-c.notify:
			for _, del := range d.take(c) {
				if err := deliver(del); err != nil {
					return err
				}
			}
			idle.Reset(o.n.cfg.GroupHeartbeat)
		}
	}
}

func (o *groupOwner) settle(ns, group string, ids []string, action nodeapi.SettleAction, reason string) error {
	d, err := o.dispatcherFor(ns, group)
	if err != nil {
		return err
	}
	if d == nil {
		// No consumer attached here: nothing is in flight. The group may
		// not exist at all.
		if _, err := o.record(ns, group); err != nil {
			return err
		}
		return &nodeapi.NotInFlightError{IDs: ids}
	}
	return d.settle(ids, action, reason)
}

func (o *groupOwner) stats(ns, group string) (nodeapi.GroupState, bool) {
	d, err := o.dispatcherFor(ns, group)
	if err != nil || d == nil {
		return nodeapi.GroupState{}, false
	}
	return d.state(), true
}

// record reads a group's committed record from the local state.
func (o *groupOwner) record(ns, group string) (*fsmv1.GroupRecord, error) {
	v, err := o.n.store.View(ns)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	return v.Group(group)
}
