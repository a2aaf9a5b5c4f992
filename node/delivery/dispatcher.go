package delivery

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// The dispatcher: one subscription group's delivery loop on the leader
// (Owner, owner.go, runs one per group with a consumer).

// dispatcher hands one group's messages to its consumers. Messages flow
// replay (parked, replayed) -> retry (failed deliveries) -> pending (read
// from the source in global-position order) -> in flight -> settled.
//
// INVARIANTS (under mu):
//  1. Every message of the source with checkpoint <= gp < cursor is settled,
//     or is in exactly one of pending, retry, inflight, toPark.
//  2. checkpoint() = min(cursor, lowest gp in pending, retry, inflight or
//     toPark of a message that is not a replay); only saved values reach
//     Raft, and fsm keeps the highest, so a save never skips an unsettled
//     message (at-least-once).
//  3. Under the pinned strategy a stream has at most one message in
//     flight, and it is the lowest unsettled one of that stream.
type dispatcher struct {
	o        *Owner
	ns, name string
	done     chan struct{} // closed by stop
	wake     chan struct{} // cap 1: something changed

	mu struct {
		sync.Mutex
		rec       *fsmv1.GroupRecord
		stopped   bool
		consumers []*groupConsumer // attach order
		seq       uint64
		rr        int
		cursor    int64 // next global position to read from the source
		// streamPos (a stream source) is where the next read of the
		// stream starts: every message of the stream below this position
		// lies below cursor, so a read from it with cursor as its floor
		// returns what a read from position 0 would, without walking the
		// stream's head again on every refresh.
		streamPos  int64
		head       int64 // the namespace's next global position at the last read
		pending    []*groupItem
		retry      []*groupItem // by gp
		replay     []*groupItem // by gp
		replayVer  uint64       // record replay_version the replay list reflects
		inflight   map[string]*groupItem
		inBytes    int // Size of the messages in inflight
		toPark     []*groupItem
		replayDone []int64
		unsaved    int       // settled since the last save
		dirtySince time.Time // first unsaved settle
		stats      nodeapi.GroupState
		// failed are the counts an earlier dispatcher of the group left
		// (groupFailures), taken as the messages are read again.
		failed *groupFailures
	}
	err error // why it stopped; set before done closes
}

type groupItem struct {
	msg        fsm.Message
	deliveries int32
	consumer   *groupConsumer
	deadline   time.Time
	replayed   bool
	reason     string
}

type groupConsumer struct {
	id       uint64
	name     string
	inflight int
	queue    []nodeapi.GroupDelivery // under dispatcher.mu
	notify   chan struct{}           // cap 1
}

// newDispatcher makes the dispatcher of a group, starting from the counts
// f an earlier one left (nil: none), if they are of this incarnation.
func newDispatcher(o *Owner, ns, name string, f *groupFailures) (*dispatcher, error) {
	rec, err := o.record(ns, name)
	if err != nil {
		return nil, err
	}
	d := &dispatcher{o: o, ns: ns, name: name, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	d.mu.rec = rec
	if f != nil && f.incarnation == rec.Id {
		d.mu.failed = f
	}
	d.mu.cursor = rec.Checkpoint
	d.mu.inflight = make(map[string]*groupItem)
	return d, nil
}

func (d *dispatcher) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatcher) stop(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.stopped {
		return
	}
	d.mu.stopped = true
	d.err = err
	close(d.done)
}

func (d *dispatcher) attach(name string) (*groupConsumer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.stopped {
		return nil, d.err
	}
	if max := int(d.mu.rec.Settings.MaxConsumers); len(d.mu.consumers) >= max {
		return nil, fmt.Errorf("%w: group %q allows %d", nodeapi.ErrTooManyConsumers, d.name, max)
	}
	d.mu.seq++
	c := &groupConsumer{id: d.mu.seq, name: name, notify: make(chan struct{}, 1)}
	d.mu.consumers = append(d.mu.consumers, c)
	d.kick()
	return c, nil
}

// detach removes c; what it held goes back for redelivery (each counts as
// a failed delivery).
func (d *dispatcher) detach(c *groupConsumer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.consumers = slices.DeleteFunc(d.mu.consumers, func(x *groupConsumer) bool { return x == c })
	for id, it := range d.mu.inflight {
		if it.consumer == c {
			d.landLocked(id, it)
			d.failLocked(it, "consumer left")
		}
	}
	d.kick()
}

// take hands c its queued deliveries.
func (d *dispatcher) take(c *groupConsumer) []nodeapi.GroupDelivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	q := c.queue
	c.queue = nil
	return q
}

func (d *dispatcher) settle(ids []string, action nodeapi.SettleAction, reason string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.stopped {
		return d.err
	}
	var missing []string
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if _, ok := d.mu.inflight[id]; !ok || seen[id] {
			missing = append(missing, id)
		}
		seen[id] = true
	}
	if len(missing) > 0 {
		return &nodeapi.NotInFlightError{IDs: missing}
	}
	for _, id := range ids {
		it := d.mu.inflight[id]
		d.landLocked(id, it)
		it.consumer.inflight--
		switch action {
		case nodeapi.SettleRetry:
			d.failLocked(it, "nack")
		case nodeapi.SettlePark:
			it.reason = reason
			if it.reason == "" {
				it.reason = "parked by the consumer"
			}
			d.parkLocked(it)
		default:
			d.doneLocked(it)
			d.mu.stats.Acked++
		}
	}
	d.kick()
	return nil
}

func (d *dispatcher) doneLocked(it *groupItem) {
	if it.replayed {
		d.mu.replayDone = append(d.mu.replayDone, it.msg.GlobalPosition)
	}
	d.dirtyLocked()
}

func (d *dispatcher) dirtyLocked() {
	if d.mu.unsaved == 0 {
		d.mu.dirtySince = time.Now()
	}
	d.mu.unsaved++
}

func (d *dispatcher) parkLocked(it *groupItem) {
	d.mu.toPark = append(d.mu.toPark, it)
	d.mu.stats.Parked++
	d.dirtyLocked()
}

// failLocked handles a failed delivery: retry, or park past max retries.
func (d *dispatcher) failLocked(it *groupItem, why string) {
	if it.deliveries > d.mu.rec.Settings.GetMaxRetries() {
		it.reason = fmt.Sprintf("%s after %d deliveries (max retries %d)",
			why, it.deliveries, d.mu.rec.Settings.GetMaxRetries())
		d.parkLocked(it)
		return
	}
	insertByGP(&d.mu.retry, it)
}

func insertByGP(q *[]*groupItem, it *groupItem) {
	i, _ := slices.BinarySearchFunc(*q, it.msg.GlobalPosition, func(x *groupItem, gp int64) int {
		return compareInt64(x.msg.GlobalPosition, gp)
	})
	*q = slices.Insert(*q, i, it)
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (d *dispatcher) checkpointLocked() int64 {
	cp := d.mu.cursor
	low := func(it *groupItem) {
		if !it.replayed && it.msg.GlobalPosition < cp {
			cp = it.msg.GlobalPosition
		}
	}
	if len(d.mu.pending) > 0 {
		low(d.mu.pending[0])
	}
	for _, q := range [][]*groupItem{d.mu.retry, d.mu.toPark} {
		for _, it := range q {
			low(it)
		}
	}
	for _, it := range d.mu.inflight {
		low(it)
	}
	if h := d.o.cfg.Checkpoint; h != nil {
		// MutantCheckpointAhead (mutants builds only) saves the read
		// position, as if everything read were acknowledged.
		cp = h(cp, d.mu.cursor)
	}
	return cp
}

func (d *dispatcher) state() nodeapi.GroupState {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.mu.stats
	s.Active = !d.mu.stopped
	s.Consumers = len(d.mu.consumers)
	s.InFlight = int64(len(d.mu.inflight))
	s.Lag = int64(len(d.mu.pending)+len(d.mu.retry)+len(d.mu.replay)+len(d.mu.inflight)) + max(0, d.mu.head-d.mu.cursor)
	return s
}

// run is the dispatcher's loop: read, assign, expire, save, wait.
func (d *dispatcher) run() {
	defer d.o.wg.Done()
	w := d.o.n.Watch(d.ns)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		changed, ended := w.Changed()
		if ended {
			d.finish(fsm.ErrNamespaceNotFound)
			return
		}
		if err := d.step(); err != nil {
			d.finish(err)
			return
		}
		if d.idle() {
			return
		}
		wait := d.nextWake()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
		select {
		case <-d.done:
			return
		case <-d.o.life.Done():
			d.finish(nodeapi.ErrShutdown)
			return
		case <-changed:
		case <-d.wake:
		case <-timer.C:
		}
	}
}

// finish saves what it can and stops with err.
func (d *dispatcher) finish(err error) {
	if !errors.Is(err, fsm.ErrGroupNotFound) && !errors.Is(err, fsm.ErrNamespaceNotFound) && d.o.n.Owning() {
		_ = d.save(true)
	}
	d.o.remove(d)
	d.stop(err)
}

// idle stops the dispatcher when no consumer is attached and nothing is
// left to save, and leaves its failed-delivery counts to the next
// dispatcher of the group (Owner.failures): a consumer leaving is a
// failure like any other, and the last one leaving must not reset the
// count. It reports whether it stopped.
func (d *dispatcher) idle() bool {
	d.o.mu.Lock()
	defer d.o.mu.Unlock()
	d.mu.Lock()
	if len(d.mu.consumers) > 0 || d.mu.unsaved > 0 || len(d.mu.toPark) > 0 {
		d.mu.Unlock()
		return false
	}
	f := d.failuresLocked()
	d.mu.Unlock()
	key := ownerKey(d.ns, d.name)
	if d.o.active[key] == d {
		delete(d.o.active, key)
		if f != nil {
			d.o.failures[key] = f
		}
	}
	d.stop(d.o.cfg.NotOwner) // a consumer racing in retries and starts a new one
	return true
}

// failuresLocked collects the counts of the messages that failed a
// delivery and are not settled: the retry queue (no consumer, so nothing
// is in flight), messages read again that have not been handed out yet,
// and counts left by an earlier dispatcher for messages not read again
// (below the cursor they were settled or are gone). nil when there are
// none.
func (d *dispatcher) failuresLocked() *groupFailures {
	f := &groupFailures{
		incarnation: d.mu.rec.Id, replayVer: d.mu.replayVer, source: map[int64]int32{}, replay: map[int64]int32{},
	}
	if old := d.mu.failed; old != nil {
		for gp, n := range old.source {
			if gp >= d.mu.cursor {
				f.source[gp] = n
			}
		}
		if old.replayVer == d.mu.replayVer {
			maps.Copy(f.replay, old.replay)
		}
	}
	for _, q := range [][]*groupItem{d.mu.retry, d.mu.pending, d.mu.replay} {
		for _, it := range q {
			switch {
			case it.deliveries == 0:
			case it.replayed:
				f.replay[it.msg.GlobalPosition] = it.deliveries
			default:
				f.source[it.msg.GlobalPosition] = it.deliveries
			}
		}
	}
	if len(f.source) == 0 && len(f.replay) == 0 {
		return nil
	}
	return f
}

// nextWake is how long the loop may sleep: the earliest ack deadline or
// save due, at most a second.
func (d *dispatcher) nextWake() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	wait := time.Second
	now := time.Now()
	for _, it := range d.mu.inflight {
		wait = min(wait, it.deadline.Sub(now))
	}
	if d.mu.unsaved > 0 {
		wait = min(wait, d.mu.dirtySince.Add(time.Duration(d.mu.rec.Settings.CheckpointIntervalNanos)).Sub(now))
	}
	return max(wait, time.Millisecond)
}

// step runs one round. An error stops the dispatcher.
func (d *dispatcher) step() error {
	if !d.o.n.Owning() {
		return d.o.cfg.NotOwner
	}
	if err := d.refresh(); err != nil {
		return err
	}
	d.expire(time.Now())
	d.mu.Lock()
	d.assignLocked(time.Now())
	due := d.mu.unsaved >= int(d.mu.rec.Settings.CheckpointAfter) ||
		d.mu.unsaved > 0 && time.Since(d.mu.dirtySince) >= time.Duration(d.mu.rec.Settings.CheckpointIntervalNanos)
	d.mu.Unlock()
	if due {
		if err := d.save(false); err != nil {
			return d.o.saveFailed(err)
		}
	}
	return nil
}

// saveFailed is why a dispatcher whose save failed stops, as its
// consumers are told. A full disk and a shutdown are said as they are;
// anything else (leadership lost during the save, or a timeout, which is
// what a paused leader sees before it learns it lost leadership) is
// o.stopped (Config.NotOwner to every caller), never the write's unknown
// outcome, which means nothing to a consumer: the node attaches them
// again to the group's owner, and what was not saved is delivered again.
func (o *Owner) saveFailed(err error) error {
	if errors.Is(err, nodeapi.ErrStorageFull) || errors.Is(err, nodeapi.ErrShutdown) {
		return err
	}
	return fmt.Errorf("%w: %v", o.stopped, err)
}

// refresh rereads the group's record (settings, deletion, replays) and
// reads more of the source when pending runs low.
func (d *dispatcher) refresh() error {
	v, err := d.o.n.View(d.ns)
	if err != nil {
		return err
	}
	defer v.Close()
	rec, err := v.Group(d.name)
	if err != nil {
		return err
	}
	d.mu.Lock()
	if rec.Id != d.mu.rec.Id {
		d.mu.Unlock()
		return fmt.Errorf("%w: %q was deleted and created again", fsm.ErrGroupNotFound, d.name)
	}
	d.mu.rec = rec
	reloadReplay := rec.ReplayVersion != d.mu.replayVer
	cursor, streamPos := d.mu.cursor, d.mu.streamPos
	want := d.pendingCapLocked() - len(d.mu.pending)
	room := groupPendingBytes - d.pendingBytesLocked()
	if room <= 0 && len(d.mu.pending) > 0 {
		want = 0
	}
	d.mu.Unlock()

	var replay []*groupItem
	if reloadReplay {
		parked, err := v.Replaying(d.name)
		if err != nil {
			return err
		}
		for _, p := range parked {
			m, ok, err := v.MessageAt(p.GlobalPosition)
			if err != nil {
				return err
			}
			if ok {
				replay = append(replay, &groupItem{msg: m, replayed: true})
			}
		}
	}
	head, err := v.NextGlobalPosition()
	if err != nil {
		return err
	}
	var msgs []fsm.Message
	next := cursor
	if want > 0 {
		v.SetPageBytes(max(room, 1)) // at least one message
		msgs, next, streamPos, err = readSource(v, rec.Source, cursor, streamPos, want)
		if err != nil {
			return err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.head = head
	if reloadReplay {
		d.mu.replayVer = rec.ReplayVersion
		d.mu.replay = d.mu.replay[:0]
		for _, it := range replay {
			if !d.heldLocked(it.msg.GlobalPosition) {
				it.deliveries = d.failedLocked(it.msg.GlobalPosition, true)
				d.mu.replay = append(d.mu.replay, it)
			}
		}
	}
	if d.mu.cursor == cursor { // no one else moved it (only this goroutine does)
		for _, m := range msgs {
			d.mu.pending = append(d.mu.pending, &groupItem{msg: m, deliveries: d.failedLocked(m.GlobalPosition, false)})
		}
		d.mu.cursor, d.mu.streamPos = next, streamPos
	}
	return nil
}

// failedLocked takes the failed deliveries an earlier dispatcher counted
// for the message at gp (a replayed parked message, or one of the
// source): 0 when none.
func (d *dispatcher) failedLocked(gp int64, replayed bool) int32 {
	f := d.mu.failed
	if f == nil {
		return 0
	}
	m := f.source
	if replayed {
		if f.replayVer != d.mu.replayVer {
			return 0 // replayed again since: counted afresh
		}
		m = f.replay
	}
	n, ok := m[gp]
	if ok {
		delete(m, gp)
	}
	return n
}

// heldLocked reports whether gp is already in flight or queued as a replay.
func (d *dispatcher) heldLocked(gp int64) bool {
	for _, it := range d.mu.inflight {
		if it.replayed && it.msg.GlobalPosition == gp {
			return true
		}
	}
	for _, q := range [][]*groupItem{d.mu.toPark, d.mu.retry} {
		for _, it := range q {
			if it.replayed && it.msg.GlobalPosition == gp {
				return true
			}
		}
	}
	return slices.Contains(d.mu.replayDone, gp)
}

func (d *dispatcher) pendingCapLocked() int {
	return min(int(d.mu.rec.Settings.MaxInFlight)+256, 4096)
}

// Memory bounds of one group, whatever its consumers do (a consumer that
// stops reading holds its deliveries until their ack timeout): messages
// read ahead of delivery, and messages in flight, each at least one.
const (
	groupPendingBytes  = 4 << 20
	groupInFlightBytes = 16 << 20
)

// pendingBytesLocked is the Size of the messages in pending.
func (d *dispatcher) pendingBytesLocked() int {
	n := 0
	for _, it := range d.mu.pending {
		n += it.msg.Size()
	}
	return n
}

// expire returns deliveries past their ack deadline.
func (d *dispatcher) expire(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, it := range d.mu.inflight {
		if now.After(it.deadline) {
			d.landLocked(id, it)
			it.consumer.inflight--
			d.failLocked(it, "ack timeout")
		}
	}
}

// assignLocked hands queued messages to consumers with room.
func (d *dispatcher) assignLocked(now time.Time) {
	if len(d.mu.consumers) == 0 {
		return
	}
	s := d.mu.rec.Settings
	pinned := s.Strategy == fsmv1.GroupStrategy_GROUP_STRATEGY_PINNED
	var busy map[string]bool
	if pinned {
		busy = make(map[string]bool, len(d.mu.inflight))
		for _, it := range d.mu.inflight {
			busy[it.msg.Stream] = true
		}
	}
	room := int(s.MaxInFlight) - len(d.mu.inflight)
	full := false
	pass := func(q []*groupItem) []*groupItem {
		kept := q[:0]
		for _, it := range q {
			if full || room <= 0 {
				kept = append(kept, it)
				continue
			}
			if len(d.mu.inflight) > 0 && d.mu.inBytes+it.msg.Size() > groupInFlightBytes {
				full = true // one message always goes, however large
				kept = append(kept, it)
				continue
			}
			if _, dup := d.mu.inflight[it.msg.ID]; dup {
				kept = append(kept, it) // an equal id is in flight: acks could not tell them apart
				continue
			}
			var c *groupConsumer
			if pinned {
				if busy[it.msg.Stream] {
					kept = append(kept, it)
					continue
				}
				busy[it.msg.Stream] = true // later messages of the stream wait for this one
				c = d.pinnedLocked(it.msg.Stream)
				if c.inflight >= int(s.MaxInFlightPerConsumer) {
					kept = append(kept, it)
					continue
				}
			} else if c = d.nextConsumerLocked(int(s.MaxInFlightPerConsumer)); c == nil {
				full = true
				kept = append(kept, it)
				continue
			}
			d.deliverLocked(it, c, now)
			room--
		}
		clear(q[len(kept):])
		return kept
	}
	d.mu.replay = pass(d.mu.replay)
	d.mu.retry = pass(d.mu.retry)
	d.mu.pending = pass(d.mu.pending)
}

// landLocked takes the delivery of it (under id) out of flight.
func (d *dispatcher) landLocked(id string, it *groupItem) {
	delete(d.mu.inflight, id)
	d.mu.inBytes -= it.msg.Size()
}

// pinnedLocked is the consumer a stream's messages go to: the stream's
// hash over the consumers in attach order.
func (d *dispatcher) pinnedLocked(stream string) *groupConsumer {
	h := fnv.New64a()
	h.Write([]byte(stream))
	return d.mu.consumers[h.Sum64()%uint64(len(d.mu.consumers))]
}

// nextConsumerLocked is the next consumer in round-robin order with room.
func (d *dispatcher) nextConsumerLocked(perConsumer int) *groupConsumer {
	n := len(d.mu.consumers)
	for i := range n {
		c := d.mu.consumers[(d.mu.rr+i)%n]
		if c.inflight < perConsumer {
			d.mu.rr = (d.mu.rr + i + 1) % n
			return c
		}
	}
	return nil
}

func (d *dispatcher) deliverLocked(it *groupItem, c *groupConsumer, now time.Time) {
	it.deliveries++
	if it.deliveries > 1 {
		d.mu.stats.Redeliveries++
	}
	it.consumer = c
	it.deadline = now.Add(time.Duration(d.mu.rec.Settings.AckTimeoutNanos))
	d.mu.inflight[it.msg.ID] = it
	d.mu.inBytes += it.msg.Size()
	c.inflight++
	c.queue = append(c.queue, nodeapi.GroupDelivery{Message: it.msg, Delivery: it.deliveries})
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// save proposes the group's progress. Parks and settled replays taken
// into the proposal are put back if it fails before reaching Raft.
func (d *dispatcher) save(final bool) error {
	d.mu.Lock()
	if d.mu.unsaved == 0 && len(d.mu.toPark) == 0 && !final {
		d.mu.Unlock()
		return nil
	}
	parks, replayed := d.mu.toPark, d.mu.replayDone
	d.mu.toPark, d.mu.replayDone = nil, nil
	cp := d.checkpointLocked()
	unsaved := d.mu.unsaved
	d.mu.unsaved = 0
	rec := d.mu.rec
	d.mu.Unlock()

	now := time.Now().UnixNano()
	c := &fsmv1.GroupProgress{Namespace: d.ns, Name: d.name, Incarnation: rec.Id, Checkpoint: cp, Replayed: replayed}
	for _, it := range parks {
		c.Parked = append(c.Parked, &fsmv1.ParkedMessage{
			GlobalPosition: it.msg.GlobalPosition, Id: it.msg.ID, Stream: it.msg.Stream, Position: it.msg.Position,
			Reason: it.reason, Deliveries: it.deliveries, ParkedUnixNano: now,
		})
	}
	ctx, cancel := context.WithTimeout(d.o.life, d.o.cfg.ApplyTimeout)
	defer cancel()
	_, err := d.o.n.Propose(ctx, &fsmv1.Command{Kind: &fsmv1.Command_GroupProgress{GroupProgress: c}})
	if err != nil {
		d.mu.Lock()
		d.mu.toPark = append(parks, d.mu.toPark...)
		d.mu.replayDone = append(replayed, d.mu.replayDone...)
		d.mu.unsaved += unsaved
		d.mu.Unlock()
		return fmt.Errorf("save progress of group %q: %w", d.name, err)
	}
	return nil
}
