package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Stream indexes (DESIGN.md, User-defined indexes, Stream indexes): one
// entry per stream, from its latest indexed message, the matching message
// with every field of the highest stream position. Beside the entry
// (XE id fields gp -> stream) and its reverse key (XV id gp -> fields),
// which every index has, a stream index keeps the seed's reverse key by
// document, XS id stream -> (pos, gp, fields), through which a later
// message of the stream replaces the entry (upsert).
//
// Invariant (after a round that reached the end of its snapshot): for
// each stream, the index holds exactly one entry when the stream has an
// indexed message in the snapshot, that of the highest position, and
// none otherwise. Between rounds each entry is the stream's latest
// indexed message among those at or below the checkpoint of the round's
// snapshot: a removal of the entry's message stages an R record naming
// its global position, through which the round finds the stream
// (the entry's value) and recomputes it from the snapshot; an import into
// a gap below the checkpoint stages an A record, through which the round
// recomputes the streams of the imported messages. A removal of another
// message of the stream leaves the latest one in place, so it needs
// nothing.

func isStreamIndex(d *fsmv1.IndexDefinition) bool {
	return d.Kind == fsmv1.IndexKind_INDEX_KIND_STREAM
}

// indexStreamKey is XS id stream.
func indexStreamKey(id uint64, stream string) []byte {
	return append(appendUint64(append(make([]byte, 0, 10+len(stream)), prefixIndexStream...), id), stream...)
}

// streamDoc is the value of an XS key: the stream's entry.
type streamDoc struct {
	pos, gp int64
	fields  []byte
}

func (d streamDoc) encode() []byte {
	return append(appendUint64(appendUint64(make([]byte, 0, 16+len(d.fields)), uint64(d.pos)), uint64(d.gp)), d.fields...)
}

// streamDocOf reads stream's XS key of index id through the batch (found
// is false when the stream has no entry).
func (r *indexRound) streamDocOf(id uint64, stream string) (doc streamDoc, found bool, err error) {
	v, closer, err := r.b.Get(indexStreamKey(id, stream))
	if errors.Is(err, pebble.ErrNotFound) {
		return doc, false, nil
	}
	if err != nil {
		return doc, false, err
	}
	defer closer.Close()
	if len(v) < 16 {
		return doc, false, failIndex(id, "the entry of stream %q (XS) does not decode: %v", stream, errCorruptValue)
	}
	return streamDoc{int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:])), bytes.Clone(v[16:])}, true, nil
}

// upsertStream makes m (matching d, with fields) its stream's entry
// unless the entry is of a later position.
func (r *indexRound) upsertStream(d *fsmv1.IndexDefinition, c *indexCkpt, m *Message, fields []byte) error {
	old, found, err := r.streamDocOf(d.Id, m.Stream)
	if err != nil {
		return err
	}
	if found {
		if old.pos > m.Position || (old.pos == m.Position && old.gp == m.GlobalPosition && bytes.Equal(old.fields, fields)) {
			return nil // the entry is later (an import's order), or this one
		}
		if err := r.deleteEntry(d.Id, old.gp, old.fields); err != nil {
			return err
		}
		c.entries--
	}
	return r.setStreamEntry(d, c, m, fields)
}

func (r *indexRound) setStreamEntry(d *fsmv1.IndexDefinition, c *indexCkpt, m *Message, fields []byte) error {
	r.key = appendUint64(append(append(r.key[:0], indexEntryPrefix(d.Id)...), fields...), uint64(m.GlobalPosition))
	if err := r.b.Set(r.key, []byte(m.Stream), nil); err != nil {
		return err
	}
	if err := r.b.Set(indexReverseKey(d.Id, m.GlobalPosition), fields, nil); err != nil {
		return err
	}
	doc := streamDoc{m.Position, m.GlobalPosition, fields}
	if err := r.b.Set(indexStreamKey(d.Id, m.Stream), doc.encode(), nil); err != nil {
		return err
	}
	c.entries++
	r.res.Indexed++
	return nil
}

// recomputeStream sets stream's entry in d to its latest indexed message
// at or below the checkpoint in the round's snapshot, or removes it when
// there is none. The stream is walked from its last position down;
// each message read counts against the round's budget.
func (r *indexRound) recomputeStream(d *fsmv1.IndexDefinition, c *indexCkpt, stream string) error {
	old, found, err := r.streamDocOf(d.Id, stream)
	if err != nil {
		return err
	}
	if found {
		if err := r.deleteEntry(d.Id, old.gp, old.fields); err != nil {
			return err
		}
		if err := r.b.Delete(indexStreamKey(d.Id, stream), nil); err != nil {
			return err
		}
		c.entries--
		r.res.Removed++
	}
	r.touch(d.Id)
	p := streamPrefix(stream)
	it, err := r.snap.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.Last(); ok; ok = it.Prev() {
		gp, err := decodeUint64(it.Value())
		if err != nil {
			return err
		}
		if gp > c.gp {
			continue // the scan reads it
		}
		m, found, err := r.readMessage(gp)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		if !indexMatches(d, &m) {
			continue
		}
		fields, err := r.entryFields(d, &m)
		if err != nil {
			continue // skipped (counted when the scan read it)
		}
		return r.setStreamEntry(d, c, &m, fields)
	}
	return it.Error()
}

// removeStreamRun recomputes the streams of index d whose entries are of
// global positions lo..hi (their messages were removed).
func (r *indexRound) removeStreamRun(d *fsmv1.IndexDefinition, lo, hi int64) error {
	c, err := r.ckpt(d.Id)
	if err != nil {
		return err
	}
	// Collect first: a recomputed entry may fall in lo..hi again (an
	// import refilled the gap), and must not be met by this walk.
	var streams []string
	it, err := r.b.NewIter(&pebble.IterOptions{LowerBound: indexReverseKey(d.Id, lo), UpperBound: indexReverseKey(d.Id, hi+1)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		gp := keySuffixUint64(it.Key())
		r.key = appendUint64(append(append(r.key[:0], indexEntryPrefix(d.Id)...), it.Value()...), uint64(gp))
		v, closer, err := r.b.Get(r.key)
		if err != nil {
			it.Close()
			return fmt.Errorf("stream index %q: entry of reverse key %d: %w", d.Name, gp, err)
		}
		streams = append(streams, string(v))
		closer.Close()
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, s := range streams {
		if err := r.recomputeStream(d, c, s); err != nil {
			return err
		}
	}
	return nil
}

// readMessage reads the message at gp from the round's snapshot,
// counting it as read and against the round's budget; ok is false when
// there is none (removed, or never written).
func (r *indexRound) readMessage(gp int64) (m Message, ok bool, err error) {
	v, err := get(r.snap, messageKey(gp))
	if err != nil || v == nil {
		return Message{}, false, err
	}
	if m, err = decodeMessage(gp, v); err != nil {
		return Message{}, false, err
	}
	r.res.ReadBytes += int64(len(v))
	r.res.Read++
	r.budget--
	return m, true, nil
}

// addStreamRun recomputes the streams of the messages lo..hi an import
// wrote at or below d's checkpoint.
func (r *indexRound) addStreamRun(d *fsmv1.IndexDefinition, lo, hi int64) error {
	c, err := r.ckpt(d.Id)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for gp := lo; gp <= min(hi, c.gp); gp++ {
		m, found, err := r.readMessage(gp)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		if seen[m.Stream] || !indexMatches(d, &m) {
			continue
		}
		seen[m.Stream] = true
		if err := r.recomputeStream(d, c, m.Stream); err != nil {
			return err
		}
	}
	return nil
}
