package fsm

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// nsBatch stages one ApplyBatch call's writes to one namespace database.
//
// Apply reads stream versions and counters through overlays: a value is
// loaded from the database on first use and then changed only in memory,
// so later entries of the same call see earlier entries' effects. commit
// writes the changed VI and CC records, NI, GP and A into the batch and
// applies it. INVARIANT: between commits, overlay = database + batch.
type nsBatch struct {
	ns      *namespace
	b       *pebble.Batch
	sets    *sortedSets // point writes, handed to b in key order at commit (ns.sets)
	dirty   bool        // something to commit
	dropped bool        // the namespace was deleted: commit nothing
	cleared bool        // the batch deletes every key: do not read the database

	applied appliedRecord
	nextGP  int64
	counts  nsCounts
	streams map[string]*streamState
	cats    map[string]*catState
	// Idempotent writes (dedupe.go): the dedupe clock, and the ids recorded
	// since the last commit (the database does not hold them yet).
	clock      int64
	clockDirty bool
	ids        map[string]stagedID
	// typeIdx is the type index state (typeindex.go); typeIdxDirty: QF
	// must be written at commit.
	typeIdx      typeIndexState
	typeIdxDirty bool
	// indexed are the messages staged since the last commit that a query
	// can find (the tagged ones; every one once the type index is
	// complete), in global order: what a condition (condition.go) sees
	// beyond the database. INVARIANT: no deletion of messages is staged
	// meanwhile (the deletion paths commit before and after themselves),
	// so the database plus indexed is the state an entry's condition is
	// about.
	indexed []indexedMsg

	// Scratch space: sortedSets.set copies keys and values, so one buffer
	// each serves every write.
	key, val []byte
	sm       fsmv1.StoredMessage
	opts     proto.MarshalOptions

	// idfLoadBefore runs first on the goroutine of an id filter load
	// (Store.idfLoadBefore; tests only).
	idfLoadBefore func()
}

type streamState struct {
	meta streamMeta
	// exists: the stream holds a message, so it is counted in the stream
	// counts of its namespace and category. A deleted stream keeps its
	// VI record (its version) but does not exist until written again.
	exists bool
	dirty  bool
}

type catState struct {
	counts catCounts
	dirty  bool
}

func newNSBatch(ns *namespace, idfLoadBefore func()) *nsBatch {
	nb := &nsBatch{ns: ns, b: ns.db.NewBatch(), sets: &ns.sets, opts: proto.MarshalOptions{Deterministic: true}, idfLoadBefore: idfLoadBefore}
	nb.sets.reset()
	nb.reload()
	return nb
}

// reload resets the overlays to the committed state of the database.
func (nb *nsBatch) reload() {
	nb.applied, nb.nextGP, nb.counts = nb.ns.applied, nb.ns.nextGP, nb.ns.counts
	nb.clock, nb.clockDirty, nb.ids = nb.ns.dedupeClock, false, nil
	nb.typeIdx, nb.typeIdxDirty = nb.ns.typeIndex, false
	nb.indexed = nb.indexed[:0]
	nb.streams = make(map[string]*streamState)
	nb.cats = make(map[string]*catState)
	nb.cleared = false
}

func (nb *nsBatch) done(l *Entry) {
	nb.applied = appliedRecord{l.Index, l.Term}
	nb.dirty = true
}

func (nb *nsBatch) stream(name string) *streamState {
	if st, ok := nb.streams[name]; ok {
		return st
	}
	st := &streamState{meta: streamMeta{lastPos: -1}}
	if m, ok := nb.ns.metaCache.streams[name]; ok && !nb.cleared {
		st.meta, st.exists = m, m.count > 0
	} else if !nb.cleared {
		v, err := get(nb.ns.db, versionKey(name))
		if err != nil {
			stopOnStorage("read version of %q: %v", name, err)
		}
		if v != nil {
			if st.meta, err = decodeStreamMeta(v); err != nil {
				stopOnStorage("version of %q: %v", name, err)
			}
			st.exists = st.meta.count > 0
		}
	}
	nb.streams[name] = st
	return st
}

func (nb *nsBatch) category(name string) *catState {
	if cs, ok := nb.cats[name]; ok {
		return cs
	}
	cs := &catState{}
	if c, ok := nb.ns.metaCache.cats[name]; ok && !nb.cleared {
		cs.counts = c
	} else if !nb.cleared {
		v, err := get(nb.ns.db, catCountKey(name))
		if err != nil {
			stopOnStorage("read counts of category %q: %v", name, err)
		}
		if v != nil {
			if cs.counts, err = decodeCatCounts(v); err != nil {
				stopOnStorage("counts of category %q: %v", name, err)
			}
		}
	}
	nb.cats[name] = cs
	return cs
}

// catEntryFor returns the CI value template of a stream (without the
// correlation, which is per message).
func (nb *nsBatch) catEntryFor(stream string) *catEntry {
	ce := &catEntry{stream: stream}
	if id := CardinalID(stream); id != "" {
		ce.hasCardinal, ce.hash = true, cardinalHash(id)
	}
	return ce
}

// writeMessage stages one message at global position gp and updates the
// overlays. m.Position must be set.
func (nb *nsBatch) writeMessage(ce *catEntry, m *fsmv1.StoredMessage, gp int64, st *streamState) {
	nb.key = appendMessageKey(nb.key[:0], gp)
	if err := nb.sets.setMessage(nb.key, nb.opts, m); err != nil {
		panic(fmt.Errorf("fsm: encode message: %w", err))
	}
	cat := Category(m.Stream)
	ce.correlation = correlationCategory(m.Metadata)
	gpv := appendUint64(nb.val[:0], uint64(gp))
	nb.key = appendStreamKey(nb.key[:0], m.Stream, m.Position)
	nb.sets.set(nb.key, gpv)
	nb.key = appendTypeKey(nb.key[:0], m.Stream, m.Type, m.Position)
	nb.sets.set(nb.key, gpv)
	nb.key = appendCategoryKey(nb.key[:0], cat, gp)
	nb.val = ce.appendTo(nb.val[:0])
	nb.sets.set(nb.key, nb.val)
	nb.index(m, gp)

	cs := nb.category(cat)
	if !st.exists {
		st.exists = true
		nb.counts.streams++
		cs.counts.streams++
	}
	if m.Position > st.meta.lastPos {
		st.meta.lastPos, st.meta.lastGP, st.meta.lastTime = m.Position, gp, m.TimeUnixNano
	}
	st.meta.count++
	st.dirty = true
	cs.counts.messages++
	cs.dirty = true
	nb.counts.messages++
	nb.counts.lastActivity = max(nb.counts.lastActivity, m.TimeUnixNano)
	nb.dirty = true
	if nb.ns.retention != nil {
		nb.queueIfCapped(m.Stream, st)
	}
}

// index stages the query index keys of message m at gp (query.go,
// typeindex.go): its type in QA once the type index is backfilling or
// complete, and, tagged, its tags in QG and (until the type index is
// complete, while queries still read it) its type in QT.
func (nb *nsBatch) index(m *fsmv1.StoredMessage, gp int64) {
	all := nb.typeIdx.indexesAll()
	if all {
		nb.key = appendIndexKey(nb.key[:0], prefixTypeAll, m.Type, gp)
		nb.sets.set(nb.key, nil)
	}
	if len(m.Tags) == 0 {
		if nb.typeIdx.complete() {
			nb.indexed = append(nb.indexed, indexedMsg{gp: gp, typ: m.Type})
		}
		return
	}
	if !nb.typeIdx.complete() {
		nb.key = appendIndexKey(nb.key[:0], prefixTypeIdx, m.Type, gp)
		nb.sets.set(nb.key, nil)
	}
	for _, tag := range m.Tags {
		nb.key = appendIndexKey(nb.key[:0], prefixTagIdx, tag, gp)
		nb.sets.set(nb.key, nil)
	}
	nb.indexed = append(nb.indexed, indexedMsg{gp: gp, typ: m.Type, tags: m.Tags})
}

// clear stages the deletion of every key and resets the overlays to an
// empty namespace. Call it right after a commit.
func (nb *nsBatch) clear() {
	if len(nb.sets.kvs) > 0 {
		panic("fsm: clear with staged writes: they would land after the range deletion")
	}
	// Everything but the retention policies (configuration, not data) and
	// the X family of indexes: the definitions are configuration, and the
	// entries are the index loop's alone to change (the import stages a
	// clear record for it).
	for _, r := range [][2][]byte{{{}, prefixRetention}, {prefixEnd(prefixRetention), indexFamilyLo}, {indexFamilyHi, {0xff}}} {
		if err := nb.b.DeleteRange(r[0], r[1], nil); err != nil {
			stopOnStorage("stage clear: %v", err)
		}
	}
	nb.streams = make(map[string]*streamState)
	nb.cats = make(map[string]*catState)
	nb.ns.metaCache.reset()
	nb.nextGP, nb.counts, nb.cleared, nb.dirty = 1, nsCounts{}, true, true
	nb.clock, nb.clockDirty, nb.ids = 0, false, nil
	nb.indexed = nb.indexed[:0]
	if nb.typeIdx.indexesAll() {
		// Nothing is left to backfill: the index holds every message
		// from now on (QF is written again after the range deletion).
		nb.typeIdx, nb.typeIdxDirty = typeIndexState{kind: typeIndexComplete}, true
	}
	nb.ns.dropIDFilter() // reloaded from the database: the clear may yet be dropped (reset)
}

// reset drops everything staged since the last commit.
func (nb *nsBatch) reset() {
	nb.b.Close()
	nb.b = nb.ns.db.NewBatch()
	nb.sets.reset()
	nb.dirty = false
	nb.reload()
}

// checkImport reports the first record of c that clashes with a stored
// message or with an earlier record of c. The database must hold every
// staged write (call after a commit).
func (nb *nsBatch) checkImport(c *fsmv1.Import) error {
	gps := make(map[int64]struct{}, len(c.Messages))
	type streamPos struct {
		stream string
		pos    int64
	}
	positions := make(map[streamPos]struct{}, len(c.Messages))
	for i, m := range c.Messages {
		clash := func(reason string) error {
			return &PositionExistsError{Record: i, Stream: m.Stream, Position: m.Position, GlobalPosition: m.GlobalPosition, Reason: reason}
		}
		if _, ok := gps[m.GlobalPosition]; ok {
			return clash("global position appears twice in the chunk")
		}
		gps[m.GlobalPosition] = struct{}{}
		sp := streamPos{m.Stream, m.Position}
		if _, ok := positions[sp]; ok {
			return clash("stream position appears twice in the chunk")
		}
		positions[sp] = struct{}{}
		if nb.cleared {
			continue
		}
		if st := nb.stream(m.Stream); st.meta.flags&streamHardDeleted != 0 {
			return clash("the stream was hard-deleted")
		} else if st.meta.flags&streamTruncated != 0 && m.Position <= st.meta.lastPos {
			return clash("the stream's messages up to its version were deleted; positions are not reused")
		}
		for _, k := range []struct {
			key    []byte
			reason string
		}{
			{messageKey(m.GlobalPosition), "global position already stored"},
			{streamKey(m.Stream, m.Position), "stream position already stored"},
		} {
			v, err := get(nb.ns.db, k.key)
			if err != nil {
				stopOnStorage("import check: %v", err)
			}
			if v != nil {
				return clash(k.reason)
			}
		}
	}
	return nil
}

// commit writes the changed records and A, applies the batch, and makes the
// namespace's apply state match. It keeps the overlays (they now equal the
// database) and starts a new batch.
func (nb *nsBatch) commit(sync bool) error {
	if !nb.dirty {
		return nil
	}
	b := nb.b
	for name, st := range nb.streams {
		if st.dirty {
			nb.sets.set(versionKey(name), st.meta.encode())
		}
	}
	for name, cs := range nb.cats {
		if cs.dirty {
			nb.sets.set(catCountKey(name), cs.counts.encode())
		}
	}
	nb.sets.set(keyNSCounts, nb.counts.encode())
	nb.sets.set(keyNextGP, encodeUint64(nb.nextGP))
	if nb.clockDirty {
		nb.sets.set(keyDedupeClock, encodeUint64(nb.clock))
	}
	if nb.typeIdxDirty {
		nb.sets.set(keyTypeIndex, nb.typeIdx.encode())
	}
	nb.sets.set(keyApplied, nb.applied.encode())
	if err := nb.sets.flush(b); err != nil {
		return err
	}
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	if err := nb.ns.db.Apply(b, opts); err != nil {
		return err
	}
	b.Reset()
	nb.ns.applied, nb.ns.nextGP, nb.ns.counts = nb.applied, nb.nextGP, nb.counts
	nb.ns.dedupeClock, nb.clockDirty = nb.clock, false
	nb.ns.typeIndex, nb.typeIdxDirty = nb.typeIdx, false
	if f := nb.ns.idf; f != nil && (len(nb.ids) > 0 || nb.clock != 0) {
		for id, st := range nb.ids {
			f.add(st.bucket, id)
		}
		if w := dedupeWindow(nb.ns.rec); w > 0 {
			floor, _ := dedupeBuckets(w, nb.clock)
			f.expire(floor)
		}
	} else if l := nb.ns.idfLoad; l != nil {
		for id, st := range nb.ids {
			l.committed(st.bucket, id)
		}
	}
	clear(nb.ids) // the database holds them now
	clear(nb.indexed)
	nb.indexed = nb.indexed[:0]
	// Every overlay value now equals the database.
	for name, st := range nb.streams {
		st.dirty = false
		nb.ns.metaCache.putStream(name, st.meta)
	}
	for name, cs := range nb.cats {
		cs.dirty = false
		nb.ns.metaCache.putCat(name, cs.counts)
	}
	nb.dirty, nb.cleared = false, false
	return nil
}

// close releases the batch; anything staged and not committed is dropped.
func (nb *nsBatch) close() {
	nb.b.Close()
	nb.sets.reset()
}
