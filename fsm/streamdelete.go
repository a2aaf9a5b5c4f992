package fsm

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/rpc/gen/skald/fsm/v1"
)

// StreamDeletionResult is the result of a TruncateStream or DeleteStream.
type StreamDeletionResult struct {
	Namespace       string
	Stream          string
	MessagesDeleted int64
	Version         int64 // the stream's last position, which it keeps
	Index           uint64
}

func (a *applier) truncateStream(l *raft.Log, c *fsmv1.TruncateStream) any {
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

func (a *applier) deleteStream(l *raft.Log, c *fsmv1.DeleteStream) any {
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
		return &StreamDeletionResult{Namespace: c.Namespace, Stream: c.Stream, Version: st.meta.lastPos, Index: l.Index}
	}
	var flags uint64
	if c.Hard {
		flags = streamHardDeleted
	}
	return a.removeBefore(l, nb, c.Namespace, c.Stream, st.meta.lastPos+1, flags)
}

// removeBefore removes the messages of stream whose position is below
// before and sets flags on its VI record. It costs O(removed messages): it
// walks the stream's SI keys below before and, for each, deletes the M, CI
// and TI keys (the TI key needs the message's type, read from M).
//
// The walk reads the database, so the batch is committed first; and it is
// committed after, so that a later entry of the same ApplyBatch walking the
// same stream does not see (and count) the removed keys again.
func (a *applier) removeBefore(l *raft.Log, nb *nsBatch, namespace, stream string, before int64, flags uint64) any {
	a.flush(nb)
	st := nb.stream(stream)
	db, cat := nb.ns.db, Category(stream)
	lo, hi := streamKey(stream, 0), streamKey(stream, before)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		a.fatal("namespace %q: truncate %q: %v", namespace, stream, err)
	}
	var removed int64
	sm := &fsmv1.StoredMessage{}
	for ok := it.First(); ok; ok = it.Next() {
		gp, err := decodeUint64(it.Value())
		if err != nil {
			a.fatal("namespace %q: SI of %q: %v", namespace, stream, err)
		}
		v, err := get(db, messageKey(gp))
		if err != nil || v == nil {
			a.fatal("namespace %q: message %d of %q: %v (present %v)", namespace, gp, stream, err, v != nil)
		}
		if err := proto.Unmarshal(v, sm); err != nil {
			a.fatal("namespace %q: message %d: %v", namespace, gp, err)
		}
		for _, k := range [][]byte{messageKey(gp), categoryKey(cat, gp), typeKey(stream, sm.Type, sm.Position)} {
			if err := nb.b.Delete(k, nil); err != nil {
				a.fatal("stage delete: %v", err)
			}
		}
		removed++
	}
	if err := it.Close(); err != nil {
		a.fatal("namespace %q: walk %q: %v", namespace, stream, err)
	}
	if removed > 0 {
		// One range tombstone for the SI keys: less to insert, and the space
		// comes back when compaction meets it.
		if err := nb.b.DeleteRange(lo, hi, nil); err != nil {
			a.fatal("stage delete range: %v", err)
		}
	}
	cs := nb.category(cat)
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
	st.dirty, cs.dirty = true, true
	nb.done(l)
	a.flush(nb)
	return &StreamDeletionResult{Namespace: namespace, Stream: stream, MessagesDeleted: removed, Version: st.meta.lastPos, Index: l.Index}
}
