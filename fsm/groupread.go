package fsm

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Group returns the record of group name, or ErrGroupNotFound.
func (v *View) Group(name string) (*fsmv1.GroupRecord, error) {
	val, err := get(v.snap, groupKey(name))
	if err != nil {
		return nil, err
	}
	if val == nil {
		return nil, fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	}
	rec := &fsmv1.GroupRecord{}
	if err := proto.Unmarshal(val, rec); err != nil {
		return nil, fmt.Errorf("fsm: group %q: %w", name, errCorruptValue)
	}
	return rec, nil
}

// Groups returns every group of the namespace in byte order of the name.
func (v *View) Groups() ([]*fsmv1.GroupRecord, error) {
	it, err := v.iter(prefixGroup, prefixEnd(prefixGroup))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*fsmv1.GroupRecord
	for ok := it.First(); ok; ok = it.Next() {
		rec := &fsmv1.GroupRecord{}
		if err := proto.Unmarshal(it.Value(), rec); err != nil {
			return nil, fmt.Errorf("fsm: group %q: %w", bytes.TrimPrefix(it.Key(), prefixGroup), errCorruptValue)
		}
		out = append(out, rec)
	}
	return out, it.Error()
}

// GroupCount counts the namespace's groups, up to limit (it stops
// there): enough to tell whether a namespace holds its limit.
func (v *View) GroupCount(limit int) (int, error) {
	it, err := v.iter(prefixGroup, prefixEnd(prefixGroup))
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok && n < limit; ok = it.Next() {
		n++
	}
	return n, it.Error()
}

// Parked returns up to limit (negative: all) parked messages of group name
// above global position after, in order.
func (v *View) Parked(name string, after int64, limit int) ([]*fsmv1.ParkedMessage, error) {
	return v.groupItems(prefixGroupParked, name, after, limit)
}

// Replaying returns the replayed parked messages of group name that wait
// to be delivered again, in order.
func (v *View) Replaying(name string) ([]*fsmv1.ParkedMessage, error) {
	return v.groupItems(prefixGroupReplay, name, 0, -1)
}

func (v *View) groupItems(prefix []byte, name string, after int64, limit int) ([]*fsmv1.ParkedMessage, error) {
	lo := groupItemPrefix(prefix, name)
	it, err := v.iter(groupItemKey(prefix, name, after+1), prefixEnd(lo))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*fsmv1.ParkedMessage
	for ok := it.First(); ok && (limit < 0 || len(out) < limit); ok = it.Next() {
		p := &fsmv1.ParkedMessage{}
		if err := proto.Unmarshal(it.Value(), p); err != nil {
			return nil, fmt.Errorf("fsm: parked message of %q: %w", name, errCorruptValue)
		}
		out = append(out, p)
	}
	return out, it.Error()
}

// MessageAt returns the message at global position gp; ok is false when
// there is none (never written, or deleted since).
func (v *View) MessageAt(gp int64) (m Message, ok bool, err error) {
	val, err := get(v.snap, messageKey(gp))
	if err != nil || val == nil {
		return Message{}, false, err
	}
	v.decoded += int64(len(val))
	m, err = decodeMessage(gp, val)
	return m, err == nil, err
}
