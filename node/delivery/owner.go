package delivery

import (
	"context"
	"fmt"
	"sync"
	"time"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// Owner runs, on the leader, one dispatcher per subscription group
// that has a consumer attached. A dispatcher holds the group's in-memory
// delivery state (what is in flight with whom, retry counts, timers) and
// saves progress through Raft (GroupProgress, by Node.Propose). It exists
// only while Node.Owning holds (this node leads in the term whose Barrier
// it saw), so it starts from every committed save, and it stops when
// leadership goes (the node calls StopAll; every step checks): consumers then
// reconnect (through any node) to the new leader's dispatcher, which
// starts from the last checkpoint.
type Owner struct {
	n   Node
	cfg Config
	// life ends at the node's shutdown: dispatchers stop with
	// nodeapi.ErrShutdown, and saves are bounded by it.
	life context.Context
	// stopped ends a dispatcher whose progress save failed, most often
	// because leadership went during the save (a paused leader's save
	// times out before it learns that a new leader was elected). It is
	// cfg.NotOwner to every caller: consumers attach again to whoever owns
	// the group now, as after a leader change, and what was not saved is
	// delivered again.
	stopped error
	wg      sync.WaitGroup // running dispatchers
	mu      sync.Mutex
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

// New returns the owner of the groups delivered on node n. life bounds
// everything it runs: when it ends, every dispatcher stops with
// nodeapi.ErrShutdown, and Wait returns once they have.
func New(life context.Context, n Node, cfg Config) *Owner {
	return &Owner{
		n: n, cfg: cfg, life: life, stopped: fmt.Errorf("%w: group owner stopped", cfg.NotOwner),
		active: make(map[string]*dispatcher), failures: make(map[string]*groupFailures),
	}
}

// Wait returns when every dispatcher started has returned. Call it after
// life ended.
func (o *Owner) Wait() { o.wg.Wait() }

func ownerKey(ns, group string) string { return ns + "\x00" + group }

// dispatcherFor returns the running dispatcher of a group, or nil.
func (o *Owner) dispatcherFor(ns, group string) (*dispatcher, error) {
	if !o.n.Owning() {
		return nil, o.cfg.NotOwner
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.active[ownerKey(ns, group)], nil
}

// attach adds a consumer to a group's dispatcher, starting it. Both happen
// under o.mu, so an idle dispatcher cannot stop in between.
func (o *Owner) attach(ns, group, name string) (*dispatcher, *groupConsumer, error) {
	if !o.n.Owning() {
		return nil, nil, o.cfg.NotOwner
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.life.Err() != nil {
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
		o.wg.Add(1)
		go d.run()
	}
	c, err := d.attach(name)
	return d, c, err
}

// remove takes d out of the registry (if it is still there).
func (o *Owner) remove(d *dispatcher) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.active[ownerKey(d.ns, d.name)] == d {
		delete(o.active, ownerKey(d.ns, d.name))
	}
}

// StopAll stops every dispatcher with err: leadership went.
func (o *Owner) StopAll(err error) {
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

// Consume attaches a consumer named name to group of namespace ns on
// this node, starting the group's dispatcher, and calls deliver for each
// message handed to it until ctx ends, deliver or heartbeat fails, or the
// dispatcher stops (leadership went: Config.NotOwner; the group was
// deleted: fsm.ErrGroupNotFound; shutdown: nodeapi.ErrShutdown).
// heartbeat is called once the consumer is attached, then after every
// idle Config.Heartbeat. What the consumer held when it returns goes back
// for redelivery.
func (o *Owner) Consume(ctx context.Context, ns, group, name string,
	deliver func(nodeapi.GroupDelivery) error, heartbeat func() error) error {
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
	idle := time.NewTimer(o.cfg.Heartbeat)
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
			idle.Reset(o.cfg.Heartbeat)
		case <-c.notify:
			for _, del := range d.take(c) {
				if err := deliver(del); err != nil {
					return err
				}
			}
			idle.Reset(o.cfg.Heartbeat)
		}
	}
}

// Settle settles the delivered messages ids of group, all or nothing:
// an id not in flight fails the call with a *nodeapi.NotInFlightError
// and settles none. reason is kept with parked messages.
func (o *Owner) Settle(ns, group string, ids []string, action nodeapi.SettleAction, reason string) error {
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

// Stats returns the live state of a group's dispatcher; ok is false when
// none runs here (no consumer attached, or this node does not own groups).
func (o *Owner) Stats(ns, group string) (nodeapi.GroupState, bool) {
	d, err := o.dispatcherFor(ns, group)
	if err != nil || d == nil {
		return nodeapi.GroupState{}, false
	}
	return d.state(), true
}

// record reads a group's committed record from the local state.
func (o *Owner) record(ns, group string) (*fsmv1.GroupRecord, error) {
	v, err := o.n.View(ns)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	return v.Group(group)
}
