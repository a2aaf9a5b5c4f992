package fsm

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Subscription groups (persistent subscriptions). The state machine keeps
// what must survive a leader change: each group's definition, its
// checkpoint (every message of the source below it is settled) and its
// parked messages. Who holds which message right now, retry counts and
// timers live only with the group's owner, the leader (node/group*.go),
// which saves progress through GroupProgress entries.
//
// Keys in the namespace database:
//
//	SG name             -> GroupRecord (protobuf)
//	SP name 0x00 gp     -> ParkedMessage: parked, waiting for replay or delete
//	SR name 0x00 gp     -> ParkedMessage: replayed, to be delivered again
//
// Invariants: GroupRecord.parked_count is the number of SP keys of the
// group and replay_count the number of SR keys; a global position is under
// at most one of SP and SR; checkpoint never decreases.
//
// Group commands are rare next to appends, so each one commits what its
// ApplyBatch staged so far, reads the database directly, and commits again
// (as stream deletion does): no overlay is needed. Its keys (SG, SP, SR)
// are in keys.go with every other.

// Group errors (business errors: per-entry results).
var (
	// ErrGroupNotFound is returned for a command or read naming a group
	// that does not exist (or a progress save for an earlier incarnation).
	ErrGroupNotFound = errors.New("fsm: subscription group not found")
	// ErrGroupExists is returned when creating a group whose name is taken.
	ErrGroupExists = errors.New("fsm: subscription group already exists")
	// ErrParkedNotFound is returned when replaying or deleting a global
	// position the group has not parked.
	ErrParkedNotFound = errors.New("fsm: parked message not found")
)

func groupKey(name string) []byte { return append(append([]byte{}, prefixGroup...), name...) }

func groupItemPrefix(prefix []byte, name string) []byte {
	k := append(append(make([]byte, 0, len(prefix)+len(name)+9), prefix...), name...)
	return append(k, 0)
}

func groupItemKey(prefix []byte, name string, gp int64) []byte {
	return appendUint64(groupItemPrefix(prefix, name), uint64(gp))
}

// groupOp is the common frame of a group command: the namespace batch
// committed, the record read.
func (a *applier) groupOp(l *Entry, namespace string) (nb *nsBatch, result any, done bool) {
	nb, result, done = a.target(l, namespace)
	if done {
		return nil, result, true
	}
	a.flush(nb)
	return nb, nil, false
}

// existingGroup is groupOp for an entry on the group name, which must
// exist: rec is its record. When nb is nil, answer is the entry's answer
// instead (skipped, or ErrGroupNotFound).
func (a *applier) existingGroup(l *Entry, namespace, name string) (nb *nsBatch, rec *fsmv1.GroupRecord, answer any) {
	nb, skipped, done := a.groupOp(l, namespace)
	if done {
		return nil, nil, skipped
	}
	if rec = a.readGroup(nb, name); rec == nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	}
	return nb, rec, nil
}

func (a *applier) readGroup(nb *nsBatch, name string) *fsmv1.GroupRecord {
	v, err := get(nb.ns.db, groupKey(name))
	if err != nil {
		a.fatal("read group %q: %v", name, err)
	}
	if v == nil {
		return nil
	}
	rec := &fsmv1.GroupRecord{}
	if err := proto.Unmarshal(v, rec); err != nil {
		a.fatal("group %q: %v", name, err)
	}
	return rec
}

func (a *applier) writeGroup(nb *nsBatch, rec *fsmv1.GroupRecord) {
	v, err := proto.MarshalOptions{Deterministic: true}.Marshal(rec)
	if err != nil {
		a.fatal("encode group %q: %v", rec.Name, err)
	}
	if err := nb.b.Set(groupKey(rec.Name), v, nil); err != nil {
		a.fatal("stage group %q: %v", rec.Name, err)
	}
}

// finishGroup commits the entry's writes (A included).
func (a *applier) finishGroup(l *Entry, nb *nsBatch) {
	nb.done(l)
	a.flush(nb)
}

func (a *applier) createGroup(l *Entry, c *fsmv1.CreateGroup) any {
	if err := ValidateGroupName("name", c.Name); err != nil {
		return err
	}
	if err := ValidateGroupSource(c.Source); err != nil {
		return err
	}
	if c.Start < 0 {
		return invalid("start_global_position", "must be 0 or more, got %d", c.Start)
	}
	settings := MergeGroupSettings(DefaultGroupSettings(), c.Settings)
	if err := ValidateGroupSettings(settings); err != nil {
		return err
	}
	nb, skipped, done := a.groupOp(l, c.Namespace)
	if done {
		return skipped
	}
	if a.readGroup(nb, c.Name) != nil {
		return fmt.Errorf("%w: %q", ErrGroupExists, c.Name)
	}
	start := max(c.Start, 1)
	if c.StartAtEnd {
		start = nb.nextGP
	}
	source := c.Source
	if source == nil {
		source = &fsmv1.GroupSource{}
	}
	rec := &fsmv1.GroupRecord{
		Name: c.Name, Id: l.Index, Source: source, Start: start, Settings: settings,
		CreatedUnixNano: c.CreatedUnixNano, Checkpoint: start, Version: l.Index,
	}
	a.writeGroup(nb, rec)
	a.finishGroup(l, nb)
	return &fsmv1.GroupResult{Namespace: c.Namespace, Group: rec}
}

func (a *applier) updateGroup(l *Entry, c *fsmv1.UpdateGroup) any {
	nb, rec, answer := a.existingGroup(l, c.Namespace, c.Name)
	if nb == nil {
		return answer
	}
	settings := MergeGroupSettings(rec.Settings, c.Settings)
	if err := ValidateGroupSettings(settings); err != nil {
		return err
	}
	rec.Settings, rec.Version = settings, l.Index
	a.writeGroup(nb, rec)
	a.finishGroup(l, nb)
	return &fsmv1.GroupResult{Namespace: c.Namespace, Group: rec}
}

func (a *applier) deleteGroup(l *Entry, c *fsmv1.DeleteGroup) any {
	nb, rec, answer := a.existingGroup(l, c.Namespace, c.Name)
	if nb == nil {
		return answer
	}
	if err := nb.b.Delete(groupKey(c.Name), nil); err != nil {
		a.fatal("stage group delete: %v", err)
	}
	for _, p := range [][]byte{prefixGroupParked, prefixGroupReplay} {
		lo := groupItemPrefix(p, c.Name)
		if err := nb.b.DeleteRange(lo, prefixEnd(lo), nil); err != nil {
			a.fatal("stage group delete: %v", err)
		}
	}
	a.finishGroup(l, nb)
	return &fsmv1.GroupResult{Namespace: c.Namespace, Group: rec}
}

// groupProgress saves a group's checkpoint and its newly parked and
// re-settled replayed messages, atomically: a message parked in the same
// entry that moves the checkpoint past it is never lost.
func (a *applier) groupProgress(l *Entry, c *fsmv1.GroupProgress) any {
	if c.Checkpoint < 0 {
		return invalid("checkpoint", "must be 0 or more, got %d", c.Checkpoint)
	}
	nb, rec, answer := a.existingGroup(l, c.Namespace, c.Name)
	if nb == nil {
		return answer
	}
	if rec.Id != c.Incarnation {
		return fmt.Errorf("%w: %q", ErrGroupNotFound, c.Name) // deleted and created again
	}
	rec.Checkpoint = max(rec.Checkpoint, c.Checkpoint)
	staged := make(map[string]bool) // keys this entry set (true) or deleted (false)
	exists := func(k []byte) bool {
		if v, ok := staged[string(k)]; ok {
			return v
		}
		v, err := get(nb.ns.db, k)
		if err != nil {
			a.fatal("read group item: %v", err)
		}
		return v != nil
	}
	for _, gp := range c.Replayed {
		k := groupItemKey(prefixGroupReplay, c.Name, gp)
		if exists(k) {
			a.groupDelete(nb, k)
			staged[string(k)] = false
			rec.ReplayCount--
		}
	}
	for _, p := range c.Parked {
		if p.GlobalPosition < 1 {
			continue
		}
		rk := groupItemKey(prefixGroupReplay, c.Name, p.GlobalPosition)
		if exists(rk) {
			a.groupDelete(nb, rk)
			staged[string(rk)] = false
			rec.ReplayCount--
		}
		pk := groupItemKey(prefixGroupParked, c.Name, p.GlobalPosition)
		if !exists(pk) {
			rec.ParkedCount++
		}
		a.groupSet(nb, pk, p)
		staged[string(pk)] = true
	}
	a.writeGroup(nb, rec)
	a.finishGroup(l, nb)
	return &fsmv1.GroupResult{Namespace: c.Namespace, Group: rec}
}

func (a *applier) groupSet(nb *nsBatch, k []byte, p *fsmv1.ParkedMessage) {
	v, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		a.fatal("encode parked message: %v", err)
	}
	if err := nb.b.Set(k, v, nil); err != nil {
		a.fatal("stage parked message: %v", err)
	}
}

func (a *applier) groupDelete(nb *nsBatch, k []byte) {
	if err := nb.b.Delete(k, nil); err != nil {
		a.fatal("stage group item delete: %v", err)
	}
}

// selectParked returns the parked entries gps names (each must exist), or
// with none the first limit parked entries.
func (a *applier) selectParked(nb *nsBatch, name string, gps []int64, limit int32) ([]*fsmv1.ParkedMessage, error) {
	var out []*fsmv1.ParkedMessage
	decode := func(v []byte) *fsmv1.ParkedMessage {
		p := &fsmv1.ParkedMessage{}
		if err := proto.Unmarshal(v, p); err != nil {
			a.fatal("parked message of %q: %v", name, err)
		}
		return p
	}
	if len(gps) > 0 {
		for _, gp := range gps {
			v, err := get(nb.ns.db, groupItemKey(prefixGroupParked, name, gp))
			if err != nil {
				a.fatal("read parked message: %v", err)
			}
			if v == nil {
				return nil, fmt.Errorf("%w: group %q has not parked global position %d", ErrParkedNotFound, name, gp)
			}
			out = append(out, decode(v))
		}
		return out, nil
	}
	if limit == 0 {
		limit = MaxGroupParkedBatch
	}
	lo := groupItemPrefix(prefixGroupParked, name)
	it, err := nb.ns.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		a.fatal("iterate parked messages: %v", err)
	}
	defer it.Close()
	for ok := it.First(); ok && len(out) < int(limit); ok = it.Next() {
		out = append(out, decode(it.Value()))
	}
	if err := it.Error(); err != nil {
		a.fatal("iterate parked messages: %v", err)
	}
	return out, nil
}

func (a *applier) replayParked(l *Entry, c *fsmv1.ReplayParked) any {
	return a.changeParked(l, c.Namespace, c.Name, c.GlobalPositions, c.Limit, true)
}

func (a *applier) deleteParked(l *Entry, c *fsmv1.DeleteParked) any {
	return a.changeParked(l, c.Namespace, c.Name, c.GlobalPositions, c.Limit, false)
}

// changeParked moves parked messages to replay (replay) or forgets them.
func (a *applier) changeParked(l *Entry, namespace, name string, gps []int64, limit int32, replay bool) any {
	if err := validateGroupPositions(gps, limit); err != nil {
		return err
	}
	nb, rec, answer := a.existingGroup(l, namespace, name)
	if nb == nil {
		return answer
	}
	sel, err := a.selectParked(nb, name, gps, limit)
	if err != nil {
		return err
	}
	for _, p := range sel {
		a.groupDelete(nb, groupItemKey(prefixGroupParked, name, p.GlobalPosition))
		if replay {
			a.groupSet(nb, groupItemKey(prefixGroupReplay, name, p.GlobalPosition), p)
		}
	}
	rec.ParkedCount -= int64(len(sel))
	if replay {
		rec.ReplayCount += int64(len(sel))
		rec.ReplayVersion, rec.Version = l.Index, l.Index
	}
	a.writeGroup(nb, rec)
	a.finishGroup(l, nb)
	return &fsmv1.ParkedChangeResult{Namespace: namespace, Group: name, Changed: int64(len(sel)), Parked: rec.ParkedCount}
}
