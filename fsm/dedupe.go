package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Idempotent writes (issue #18). A namespace remembers the message ids that
// clients gave (NewMessage.client_id) for a window of entry time; an append
// whose ids are all remembered, each for the same stream, type, data and tags and
// in the order of one earlier append (all of it, or a run of it), is a retry:
// apply writes nothing and answers the original positions
// (AppendResult.Duplicate). A remembered id with other content, or an
// append mixing remembered and new ids, or ids of several earlier appends,
// is a DuplicateIDError and writes nothing.
//
// Storage: DI bucket id -> global position, stream position, place in its
// append, stream (see appendIDEntry), in the namespace DB and the
// append's batch. bucket = dedupe clock / window, so one window's ids are
// in at most two buckets (two point lookups per id) and expiry is a range
// delete of the buckets below (clock - window) / window: no reads, the
// same on every replica. The dedupe clock (DC) is the highest entry time
// (the leader's stamp, Append.time_unix_nano; never a replica's clock) of
// an append that recorded ids. It never goes back when a new leader's
// clock is behind, so the buckets apply looks at depend only on the log.
// The content check reads the M record the id points at (exact, and no
// hash in the index). A namespace that remembers ids forever keeps them in
// bucket 0 and never expires them.
//
// An id is remembered for at least the window and at most twice it.

// Dedupe windows (CreateNamespace.dedupe_window_nanos).
const (
	// DefaultDedupeWindow is the window of a namespace created without one
	// (and of namespaces created before idempotent writes existed).
	DefaultDedupeWindow = 2 * time.Minute
	// MinDedupeWindow is the shortest window a namespace may have.
	MinDedupeWindow = time.Second
	// DedupeOff: ids are not remembered; the same id may be written again.
	DedupeOff = -1
	// DedupeForever: every client-given id is remembered for good.
	DedupeForever = -2
)

// DuplicateReason says why an append's remembered id was refused.
type DuplicateReason string

const (
	// DuplicateContent: the id was written with another stream, type or
	// data.
	DuplicateContent DuplicateReason = "content"
	// DuplicateMixed: the append mixes remembered ids with new ones (or its
	// remembered ids are not one earlier append in order).
	DuplicateMixed DuplicateReason = "mixed"
)

// DuplicateIDError is returned when an append carries a remembered message
// id and is not a plain retry of the append that wrote it. Nothing was
// written. It matches ErrDuplicateID with errors.Is.
type DuplicateIDError struct {
	Message int // index of the message in the append (in its stream's part of an AppendMulti)
	// Field is the message's path when it is not messages[Message]
	// (AppendMulti: streams[i].messages[j]).
	Field          string
	ID             string
	Stream         string // where the id was written
	Position       int64
	GlobalPosition int64
	Reason         DuplicateReason
}

func (e *DuplicateIDError) Error() string { return "fsm: " + e.Describe() }

// Describe is the error's text without the package prefix: the message
// both APIs send.
func (e *DuplicateIDError) Describe() string {
	path := e.Field
	if path == "" {
		path = fmt.Sprintf("messages[%d]", e.Message)
	}
	if e.Reason == DuplicateContent {
		return fmt.Sprintf("%s.id %s was already written to stream %q at position %d (global position %d) with a different stream, type or data",
			path, e.ID, e.Stream, e.Position, e.GlobalPosition)
	}
	return fmt.Sprintf("%s.id %s was already written to stream %q at position %d (global position %d) but the append is not that write again: a retry must resend the original append, and new messages need new ids",
		path, e.ID, e.Stream, e.Position, e.GlobalPosition)
}

// Is makes errors.Is(err, ErrDuplicateID) true.
func (e *DuplicateIDError) Is(target error) bool { return target == ErrDuplicateID }

// ValidateDedupeWindow checks a CreateNamespace.dedupe_window_nanos value.
func ValidateDedupeWindow(nanos int64) error {
	switch {
	case nanos == 0, nanos == DedupeOff, nanos == DedupeForever:
		return nil
	case nanos < int64(MinDedupeWindow):
		return invalid("dedupe_window", "must be at least %s (or 0 for the default, -1 for off, -2 for forever), got %d ns", MinDedupeWindow, nanos)
	}
	return nil
}

// dedupeWindow is the effective window of a namespace record: a positive
// duration in ns, DedupeOff or DedupeForever.
func dedupeWindow(rec *fsmv1.NamespaceRecord) int64 {
	if rec.DedupeWindowNanos == 0 {
		return int64(DefaultDedupeWindow)
	}
	return rec.DedupeWindowNanos
}

// DedupeWindow reports a namespace's idempotent-write window: forever, or
// the window (0 when off).
func (i NamespaceInfo) DedupeWindow() (window time.Duration, forever bool) {
	switch i.DedupeWindowNanos {
	case 0:
		return DefaultDedupeWindow, false
	case DedupeOff:
		return 0, false
	case DedupeForever:
		return 0, true
	}
	return time.Duration(i.DedupeWindowNanos), false
}

// dedupeBuckets returns the buckets an id may be remembered in at dedupe
// clock clock: floor..cur. A forever window has only bucket 0.
func dedupeBuckets(window, clock int64) (floor, cur int64) {
	if window == DedupeForever {
		return 0, 0
	}
	lo := max(clock-window, 0)
	return lo / window, max(clock, 0) / window
}

func appendDedupeKey(dst []byte, bucket int64, id string) []byte {
	return append(appendUint64(append(dst, prefixDedupe...), uint64(bucket)), id...)
}

func dedupeBucketKey(bucket int64) []byte {
	return appendUint64(append(make([]byte, 0, len(prefixDedupe)+8), prefixDedupe...), uint64(bucket))
}

// stagedID is a remembered id: one recorded by an append of the current
// batch, not yet committed (what a lookup needs without reading the
// database), or one read from the index.
type stagedID struct {
	bucket   int64
	stream   string
	typ      string
	data     []byte
	tags     []string
	position int64
	gp       int64
	// first is the global position of the first message of the append
	// that wrote the id (of its stream's part, in an AppendMulti): ids
	// with the same first were written by one append. 0 when unknown: an
	// entry written before the index kept it.
	first int64
	// removed: the message was deleted since (streamdelete.go); only
	// stream, position, gp and first are known, from the index entry.
	removed bool
}

// The value of a DI key:
//
//	gp (8) | position (8), bit 63 set | offset (2) | stream
//
// The message's global position, its stream position, its offset in the
// append that wrote it (its index among the messages of that append, or of
// its stream's part of an AppendMulti; at most MaxAppendMessages), and the
// stream name: an id whose message was deleted since still answers a
// retry with the original positions (a delete does not read the messages
// it removes, so it cannot drop their ids), and a retry is told from ids
// of several appends. Positions never reach bit 63 (MaxPosition), so the
// bit marks the offset. Values written before hold less, and are still
// read: 16 bytes and the stream (no offset: which append wrote the id is
// unknown), or 8 bytes (the global position only).
func appendIDEntry(dst []byte, gp, position int64, offset int, stream string) []byte {
	dst = appendUint64(appendUint64(dst, uint64(gp)), uint64(position)|idEntryOffset)
	dst = binary.BigEndian.AppendUint16(dst, uint16(offset))
	return append(dst, stream...)
}

// idEntryOffset marks a DI value that holds the message's offset in its
// append.
const idEntryOffset = 1 << 63

// idEntry is a decoded DI value.
type idEntry struct {
	gp, position int64
	stream       string
	first        int64 // global position of the append's first message; 0: unknown
	full         bool  // stream and position are known
}

func decodeIDEntry(v []byte) (idEntry, error) {
	switch {
	case len(v) == 8:
		gp, err := decodeUint64(v)
		return idEntry{gp: gp}, err
	case len(v) >= 16:
		e := idEntry{gp: int64(binary.BigEndian.Uint64(v)), full: true}
		pos := binary.BigEndian.Uint64(v[8:])
		if pos&idEntryOffset == 0 {
			e.position, e.stream = int64(pos), string(v[16:])
			return e, nil
		}
		if len(v) < 18 {
			return idEntry{}, errCorruptValue
		}
		e.position = int64(pos &^ idEntryOffset)
		e.first = e.gp - int64(binary.BigEndian.Uint16(v[16:]))
		e.stream = string(v[18:])
		return e, nil
	}
	return idEntry{}, errCorruptValue
}

// checkIDs decides an append's client-given ids before anything else
// about it (a retry must not fail its expected version). It returns the
// original positions when the append is a retry, an error when it must be
// refused, and (nil, nil) when the append is new and may go on. clock is
// the dedupe clock the append would leave.
func (nb *nsBatch) checkIDs(c *fsmv1.Append) (*fsmv1.AppendResult, error) {
	window := dedupeWindow(nb.ns.rec)
	if window == DedupeOff || !hasClientID(c) {
		return nil, nil
	}
	if len(c.Messages) > 1 {
		seen := make(map[string]int, len(c.Messages))
		for i, m := range c.Messages {
			if !m.ClientId {
				continue
			}
			if j, ok := seen[m.Id]; ok {
				return nil, invalid(fmt.Sprintf("messages[%d].id", i), "repeats messages[%d].id %s", j, m.Id)
			}
			seen[m.Id] = i
		}
	}
	floor, cur := dedupeBuckets(window, max(nb.clock, c.TimeUnixNano))
	var res *fsmv1.AppendResult
	found, first := 0, -1
	var firstSt stagedID
	for i, m := range c.Messages {
		if !m.ClientId {
			continue
		}
		st, ok := nb.lookupID(m.Id, floor, cur)
		if !ok {
			continue
		}
		// A deleted message's type and data are gone: its stream and place
		// must match (below), its content cannot be compared.
		if st.stream != c.Stream || !st.removed && (st.typ != m.Type || !bytes.Equal(st.data, m.Data) || !slices.Equal(st.tags, m.Tags)) {
			return nil, &DuplicateIDError{Message: i, ID: m.Id, Stream: st.stream, Position: st.position, GlobalPosition: st.gp, Reason: DuplicateContent}
		}
		found++
		if first < 0 {
			first, firstSt = i, st
			res = &fsmv1.AppendResult{Namespace: c.Namespace, Stream: c.Stream, FirstPosition: st.position, FirstGlobalPosition: st.gp, Duplicate: true}
		}
		// A retry resends one earlier append, or a run of it: message i is
		// i after the first, and each was written by the same append (ids
		// recorded before appends were told apart only meet the first
		// rule).
		if first > 0 || st.first != firstSt.first || st.position != res.FirstPosition+int64(i) || st.gp != res.FirstGlobalPosition+int64(i) {
			return nil, mixed(i, m.Id, st)
		}
		res.LastPosition, res.LastGlobalPosition = st.position, st.gp
	}
	switch {
	case found == 0:
		return nil, nil
	case found < len(c.Messages):
		// Some messages are new: name the first remembered one.
		return nil, mixed(first, c.Messages[first].Id, firstSt)
	}
	return res, nil
}

func mixed(i int, id string, st stagedID) error {
	return &DuplicateIDError{Message: i, ID: id, Stream: st.stream, Position: st.position, GlobalPosition: st.gp, Reason: DuplicateMixed}
}

func hasClientID(c *fsmv1.Append) bool {
	for _, m := range c.Messages {
		if m.ClientId {
			return true
		}
	}
	return false
}

// idFilter returns the namespace's id filter, or nil while it loads in
// the background (started here when none is loaded or loading): then
// every id is looked up in the database, which is what the filter only
// spares.
func (nb *nsBatch) idFilter() *idFilter {
	ns := nb.ns
	if ns.idf != nil {
		return ns.idf
	}
	if ns.idfLoad == nil {
		loadFloor, _ := dedupeBuckets(dedupeWindow(ns.rec), ns.dedupeClock)
		l, err := startIDFilterLoad(ns.db, loadFloor, nb.idfLoadBefore)
		if err != nil {
			stopOnStorage("load id index: %v", err)
		}
		ns.idfLoad = l
		return nil
	}
	f, ok, err := ns.idfLoad.adopt()
	if !ok {
		return nil
	}
	ns.idfLoad = nil
	if err != nil {
		stopOnStorage("load id index: %v", err)
	}
	if w := dedupeWindow(ns.rec); w > 0 {
		floor, _ := dedupeBuckets(w, ns.dedupeClock)
		f.expire(floor)
	}
	ns.idf = f
	return f
}

// lookupID finds a remembered id in buckets floor..cur: first among the
// ids staged in this batch, then in the database.
func (nb *nsBatch) lookupID(id string, floor, cur int64) (stagedID, bool) {
	if st, ok := nb.ids[id]; ok && st.bucket >= floor {
		return st, true
	}
	if nb.cleared {
		return stagedID{}, false
	}
	idf := nb.idFilter()
	for b := cur; b >= floor; b-- {
		if idf != nil && !idf.mayContain(b, id) {
			continue
		}
		nb.key = appendDedupeKey(nb.key[:0], b, id)
		v, err := get(nb.ns.db, nb.key)
		if err != nil {
			stopOnStorage("read id index: %v", err)
		}
		if v == nil {
			continue
		}
		e, err := decodeIDEntry(v)
		if err != nil {
			stopOnStorage("id index of %s: %v", id, err)
		}
		mv, err := get(nb.ns.db, messageKey(e.gp))
		if err != nil {
			stopOnStorage("message %d of id %s: %v", e.gp, id, err)
		}
		if mv == nil {
			// The message was deleted since. An entry that names its
			// stream and position still answers a retry; an 8-byte one
			// cannot, and the id is forgotten as if its window had passed.
			if !e.full {
				continue
			}
			return stagedID{bucket: b, stream: e.stream, position: e.position, gp: e.gp, first: e.first, removed: true}, true
		}
		var m fsmv1.StoredMessage
		if err := proto.Unmarshal(mv, &m); err != nil {
			stopOnStorage("message %d: %v", e.gp, err)
		}
		return stagedID{bucket: b, stream: m.Stream, typ: m.Type, data: m.Data, tags: m.Tags, position: m.Position, gp: e.gp, first: e.first}, true
	}
	return stagedID{}, false
}

// recordIDs stages the index entries of an append just written (its first
// message at global position gp0 and stream position pos0), advances the
// dedupe clock and expires the buckets that fell out of the window.
func (nb *nsBatch) recordIDs(c *fsmv1.Append, pos0, gp0 int64) {
	window := dedupeWindow(nb.ns.rec)
	if window == DedupeOff || !hasClientID(c) {
		return
	}
	clock := max(nb.clock, c.TimeUnixNano)
	if window != DedupeForever && clock != nb.clock {
		oldFloor, _ := dedupeBuckets(window, nb.clock)
		floor, _ := dedupeBuckets(window, clock)
		if floor > oldFloor {
			if err := nb.b.DeleteRange(dedupeBucketKey(0), dedupeBucketKey(floor), nil); err != nil {
				stopOnStorage("stage id expiry: %v", err)
			}
		}
		nb.clock, nb.clockDirty = clock, true
	}
	_, cur := dedupeBuckets(window, clock)
	if nb.ids == nil {
		nb.ids = make(map[string]stagedID)
	}
	gpv := encodeUint64(0)
	for i, m := range c.Messages {
		if !m.ClientId {
			continue
		}
		gp := gp0 + int64(i)
		nb.key = appendDedupeKey(nb.key[:0], cur, m.Id)
		gpv = appendIDEntry(gpv[:0], gp, pos0+int64(i), i, c.Stream)
		if err := nb.b.Set(nb.key, gpv, nil); err != nil {
			stopOnStorage("stage id index: %v", err)
		}
		nb.ids[m.Id] = stagedID{bucket: cur, stream: c.Stream, typ: m.Type, data: m.Data, tags: m.Tags, position: pos0 + int64(i), gp: gp, first: gp0}
	}
}

// LookupID returns the message a remembered client-given id points at, as
// of the view (the dedupe clock it holds; expired buckets are not read).
// ok is false when the namespace does not remember the id.
func (v *View) LookupID(id string) (m Message, ok bool, err error) {
	window := dedupeWindow(v.ns.rec)
	if window == DedupeOff {
		return Message{}, false, nil
	}
	var clock int64
	if cv, err := get(v.snap, keyDedupeClock); err != nil {
		return Message{}, false, err
	} else if cv != nil {
		if clock, err = decodeUint64(cv); err != nil {
			return Message{}, false, err
		}
	}
	floor, cur := dedupeBuckets(window, clock)
	for b := cur; b >= floor; b-- {
		gv, err := get(v.snap, appendDedupeKey(nil, b, id))
		if err != nil {
			return Message{}, false, err
		}
		if gv == nil {
			continue
		}
		e, err := decodeIDEntry(gv)
		if err != nil {
			return Message{}, false, err
		}
		gp := e.gp
		if mv, err := get(v.snap, messageKey(gp)); err != nil {
			return Message{}, false, err
		} else if mv == nil {
			continue // deleted since: forgotten
		}
		m, err := v.message(gp)
		return m, err == nil, err
	}
	return Message{}, false, nil
}
