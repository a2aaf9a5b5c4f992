package fsm

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

func (a *applier) truncateStream(l *Entry, c *fsmv1.TruncateStream) any {
	nb, skipped, done := a.target(l, c.Namespace)
	if done {
		return skipped
	}
	if err := ValidateStreamName("stream", c.Stream); err != nil {
		return err
	}
	if c.Before < 0 {
		return invalid("before", "must be 0 or more, got %d", c.Before)
	}
	st := nb.stream(c.Stream)
	switch {
	case st.meta.lastPos < 0:
		return fmt.Errorf("%w: %q", ErrStreamNotFound, c.Stream)
	case st.meta.flags&streamHardDeleted != 0:
		return fmt.Errorf("%w: %q", ErrStreamDeleted, c.Stream)
	case c.Before > st.meta.lastPos+1:
		return invalid("before", "must be at most the stream's version + 1 (%d), got %d", st.meta.lastPos+1, c.Before)
	}
	return a.removeBefore(l, nb, c.Namespace, c.Stream, c.Before, 0)
}

func (a *applier) deleteStream(l *Entry, c *fsmv1.DeleteStream) any {
	nb, skipped, done := a.target(l, c.Namespace)
	if done {
		return skipped
	}
	if err := ValidateStreamName("stream", c.Stream); err != nil {
		return err
	}
	st := nb.stream(c.Stream)
	if c.ExpectedVersion != nil && *c.ExpectedVersion != st.meta.lastPos {
		return &VersionConflictError{Stream: c.Stream, Expected: *c.ExpectedVersion, Actual: st.meta.lastPos}
	}
	switch {
	case st.meta.lastPos < 0:
		return fmt.Errorf("%w: %q", ErrStreamNotFound, c.Stream)
	case st.meta.flags&streamHardDeleted != 0:
		// Deleting a tombstone again changes nothing and says so.
		return &fsmv1.StreamDeletionResult{Namespace: c.Namespace, Stream: c.Stream, Version: st.meta.lastPos}
	}
	var flags uint64
	if c.Hard {
		flags = streamHardDeleted
	}
	return a.removeBefore(l, nb, c.Namespace, c.Stream, st.meta.lastPos+1, flags)
}

// removeBefore removes the messages of stream whose position is below
// before and sets flags on its VI record, as one entry: see removing.
func (a *applier) removeBefore(l *Entry, nb *nsBatch, namespace, stream string, before int64, flags uint64) any {
	a.flush(nb)
	removed := a.removeRange(nb, stream, before)
	a.removed(nb, stream, removed, flags)
	nb.done(l)
	a.flush(nb)
	st := nb.stream(stream)
	return &fsmv1.StreamDeletionResult{Namespace: namespace, Stream: stream, MessagesDeleted: removed, Version: st.meta.lastPos}
}

// Removing messages reads the database to find them, so an entry that
// removes commits the batch first; and it commits again after, so that a
// later entry of the same ApplyBatch walking the same stream does not see
// (and count) the removed keys a second time. Every removal costs
// O(removed messages): never a scan of the stream or the namespace.

// removeRange stages the removal of stream's messages below before. It
// walks the SI keys in that range for the global positions, and deletes
// M and CI keys as runs of consecutive global positions (one range
// deletion per run: a stream's messages appended together are a run), the
// SI keys with one range deletion, and the TI keys with one range deletion
// per type the stream has (found by skipping from type to type, never by
// reading messages). The batch must be committed.
func (a *applier) removeRange(nb *nsBatch, stream string, before int64) int64 {
	lo, hi := streamKey(stream, 0), streamKey(stream, before)
	cat := Category(stream)
	var (
		removed    int64
		runLo, gp0 int64 = -1, -1 // the current run of global positions
	)
	endRun := func() {
		if runLo >= 0 {
			a.deleteRange(nb, messageKey(runLo), messageKey(gp0+1))
			a.deleteRange(nb, categoryKey(cat, runLo), categoryKey(cat, gp0+1))
			a.logChange(nb, changeRemoved, runLo, gp0)
		}
	}
	a.walk(nb, lo, hi, func(_, gp int64) {
		if gp != gp0+1 || runLo < 0 {
			endRun()
			runLo = gp
		}
		gp0 = gp
		removed++
	})
	endRun()
	if removed == 0 {
		return 0
	}
	a.deleteRange(nb, lo, hi)
	for _, typ := range a.streamTypes(nb, stream) {
		a.deleteRange(nb, typeKey(stream, typ, 0), typeKey(stream, typ, before))
	}
	return removed
}

// streamTypes lists the types of stream's messages from its TI keys,
// seeking past each type's keys: O(types), whatever the stream's length.
func (a *applier) streamTypes(nb *nsBatch, stream string) []string {
	p := append(append(append([]byte(nil), prefixType...), stream...), 0)
	it, err := nb.ns.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		a.fatal("namespace %q: types of %q: %v", nb.ns.rec.Name, stream, err)
	}
	var types []string
	for ok := it.First(); ok; {
		k := it.Key()
		rest := k[len(p):]
		typ := string(rest[:len(rest)-9]) // type 0x00 pos(8)
		types = append(types, typ)
		ok = it.SeekGE(prefixEnd(typePrefix(stream, typ)))
	}
	if err := it.Close(); err != nil {
		a.fatal("namespace %q: types of %q: %v", nb.ns.rec.Name, stream, err)
	}
	return types
}

// removeTypes stages the removal of stream's messages of the given types
// with a position up to through, walking the TI keys of each type.
func (a *applier) removeTypes(nb *nsBatch, stream string, types []string, through int64) int64 {
	var removed int64
	cat := Category(stream)
	for _, typ := range types {
		lo, hi := typeKey(stream, typ, 0), typeKey(stream, typ, through+1)
		n := int64(0)
		a.walk(nb, lo, hi, func(pos, gp int64) {
			a.deleteKeys(nb, messageKey(gp), categoryKey(cat, gp), streamKey(stream, pos))
			a.logChange(nb, changeRemoved, gp, gp)
			n++
		})
		if n > 0 {
			a.deleteRange(nb, lo, hi)
		}
		removed += n
	}
	return removed
}

// walk calls fn with the position (the key's trailing number) and the
// global position (the value) of every SI or TI key in [lo, hi).
func (a *applier) walk(nb *nsBatch, lo, hi []byte, fn func(pos, gp int64)) {
	it, err := nb.ns.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		a.fatal("namespace %q: walk: %v", nb.ns.rec.Name, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		gp, err := decodeUint64(it.Value())
		if err != nil {
			a.fatal("namespace %q: index key %q: %v", nb.ns.rec.Name, it.Key(), err)
		}
		fn(keySuffixUint64(it.Key()), gp)
	}
	if err := it.Close(); err != nil {
		a.fatal("namespace %q: walk: %v", nb.ns.rec.Name, err)
	}
}

func (a *applier) deleteRange(nb *nsBatch, lo, hi []byte) {
	if err := nb.b.DeleteRange(lo, hi, nil); err != nil {
		a.fatal("stage delete range: %v", err)
	}
}

func (a *applier) deleteKeys(nb *nsBatch, keys ...[]byte) {
	for _, k := range keys {
		if err := nb.b.Delete(k, nil); err != nil {
			a.fatal("stage delete: %v", err)
		}
	}
}

// removed updates the counters for removed messages of stream and sets
// flags on its VI record (truncated as well when anything went).
func (a *applier) removed(nb *nsBatch, stream string, removed int64, flags uint64) {
	st, cs := nb.stream(stream), nb.category(Category(stream))
	st.meta.count -= removed
	st.meta.flags |= flags
	if removed > 0 {
		st.meta.flags |= streamTruncated
	}
	cs.counts.messages -= removed
	nb.counts.messages -= removed
	if st.exists && st.meta.count == 0 {
		st.exists = false
		cs.counts.streams--
		nb.counts.streams--
	}
	st.dirty, cs.dirty, nb.dirty = true, true, true
}

// Limits of a DeleteByWatermark.
const (
	MaxWatermarkStreams = 10000
	MaxWatermarkTypes   = 100
)

func (a *applier) deleteByWatermark(l *Entry, c *fsmv1.DeleteByWatermark) any {
	nb, skipped, done := a.target(l, c.Namespace)
	if done {
		return skipped
	}
	if err := ValidateWatermarks(c); err != nil {
		return err
	}
	a.flush(nb)
	res := &fsmv1.WatermarkDeletionResult{Namespace: c.Namespace}
	for _, w := range c.Watermarks {
		st := nb.stream(w.Stream)
		if st.meta.count == 0 {
			continue // never written, deleted, or a tombstone: nothing to remove
		}
		var n int64
		if len(c.Types) == 0 {
			n = a.removeRange(nb, w.Stream, min(w.Position, st.meta.lastPos)+1)
		} else {
			n = a.removeTypes(nb, w.Stream, c.Types, w.Position)
		}
		if n > 0 {
			a.removed(nb, w.Stream, n, 0)
			res.MessagesDeleted += n
			res.Streams++
		}
	}
	nb.done(l)
	a.flush(nb)
	return res
}

// ValidateWatermarks checks a DeleteByWatermark as apply does (the API
// edge calls it to refuse before proposing).
func ValidateWatermarks(c *fsmv1.DeleteByWatermark) error {
	if err := ValidateStreamName("category", c.Category); err != nil {
		return err
	}
	if strings.Contains(c.Category, "-") {
		return invalid("category", "must not contain '-': %q names a stream", c.Category)
	}
	if n := len(c.Watermarks); n < 1 || n > MaxWatermarkStreams {
		return invalid("watermarks", "must name 1..%d streams, got %d", MaxWatermarkStreams, n)
	}
	for i, w := range c.Watermarks {
		field := fmt.Sprintf("watermarks[%d]", i)
		if err := ValidateStreamName(field+".stream", w.Stream); err != nil {
			return err
		}
		if Category(w.Stream) != c.Category {
			return invalid(field+".stream", "%q is not in category %q", w.Stream, c.Category)
		}
		if i > 0 && w.Stream <= c.Watermarks[i-1].Stream {
			return invalid(field+".stream", "streams must be listed once each, in byte order")
		}
		if w.Position < 0 {
			return invalid(field+".position", "must be 0 or more, got %d", w.Position)
		}
	}
	if len(c.Types) > MaxWatermarkTypes {
		return invalid("types", "at most %d types, got %d", MaxWatermarkTypes, len(c.Types))
	}
	for i, t := range c.Types {
		if err := ValidateTypeName(fmt.Sprintf("types[%d]", i), t); err != nil {
			return err
		}
	}
	return nil
}
