package fsm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Memory-mode indexes (DESIGN.md, Memory storage). An index whose
// definition says INDEX_STORAGE_MEMORY (every index of a store opened
// with Options.IndexMemory) keeps its node-local keys (XE, XV, XC, XS)
// in its namespace's memory store instead of the namespace's database:
// a Pebble database on an in-memory filesystem, without a WAL, opened
// when a round first meets such an index. The keys, their encoding and
// every line of the loop and the query path are the same in both modes:
// the round's batch (indexBatch) and the view's reads (View.iter,
// View.indexReader) route each key by the index id it carries. The store
// lives as long as the namespace handle (an idle namespace whose
// database is closed keeps it) and starts empty, so a node builds its
// memory indexes again from the namespace's messages whenever the
// handle is new: at start, and after a snapshot is restored.
//
// What is not routed: XF (a failure outlives the process, on disk), the
// definitions (XD) and the change log (XL), which are replicated state.

// DefaultIndexMemoryLimit bounds the bytes of one namespace's memory
// store on a node when Options.IndexMemoryLimit is 0.
const DefaultIndexMemoryLimit = 256 << 20

// memIndexes is a namespace's memory store.
type memIndexes struct {
	mu    sync.Mutex // opening and closing db
	db    *pebble.DB
	cache *pebble.Cache // db's block cache (memIndexCacheSize)
	// ids are the indexes routed here: every memory index the handle's
	// rounds met (a deleted one's keys go with the store). Replaced whole
	// (copy on write), so a view reads it with one atomic load.
	ids atomic.Pointer[map[uint64]bool]
	// bytes is the store's size after the last round (memtables and the
	// in-memory tables).
	bytes atomic.Int64
	// reclaim: a drop met a reader's snapshot and left its keys for the
	// first round that finds none open to compact (compactLocked; under
	// mu).
	reclaim bool
}

// isMemoryIndex reports whether d keeps its entries in memory on this
// store.
func (s *Store) isMemoryIndex(d *fsmv1.IndexDefinition) bool {
	return s.opts.IndexMemory || d.Storage == fsmv1.IndexStorage_INDEX_STORAGE_MEMORY
}

// routes reports whether key k belongs to an index the store holds.
func (m *memIndexes) routes(ids map[uint64]bool, k []byte) bool {
	if len(ids) == 0 || len(k) < 10 || k[0] != 'X' {
		return false
	}
	switch k[1] {
	case 'E', 'V', 'C', 'S': // XE, XV, XC, XS (keys.go)
		return ids[binary.BigEndian.Uint64(k[2:10])]
	}
	return false
}

// open returns the store's database, opening it on first use, and
// registers ids as routed to it.
func (m *memIndexes) open(s *Store, ids []uint64) (*pebble.DB, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.db == nil {
		// The tables are in memory already: a block cache only copies
		// them, so it is small (Pebble's default is 8 MiB per database).
		cache := pebble.NewCache(memIndexCacheSize)
		db, err := pebble.Open("", &pebble.Options{
			FS: vfs.NewMem(), DisableWAL: true, Logger: pebbleLogger{s.log}, Cache: cache,
			// Small: the store is sized by what it holds, not by a
			// write rate (memory is the bound, not flush cost).
			MemTableSize: 4 << 20,
		})
		if err != nil {
			cache.Unref()
			return nil, fmt.Errorf("open memory index store: %w", err)
		}
		m.db, m.cache = db, cache
	}
	old := m.ids.Load()
	var next map[uint64]bool
	for _, id := range ids {
		if old != nil && (*old)[id] {
			continue
		}
		if next == nil {
			next = make(map[uint64]bool, len(ids))
			if old != nil {
				for k := range *old {
					next[k] = true
				}
			}
		}
		next[id] = true
	}
	if next != nil {
		m.ids.Store(&next)
	}
	return m.db, nil
}

// snapshot is a snapshot of the store and the ids routed to it (nil
// when the store is not open).
func (m *memIndexes) snapshot() (*pebble.Snapshot, map[uint64]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.db == nil {
		return nil, nil
	}
	return m.db.NewSnapshot(), *m.ids.Load()
}

// memIndexCacheSize is the block cache of a memory store.
const memIndexCacheSize = 1 << 20

// size measures the store (measureMem).
func (m *memIndexes) size() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.db == nil {
		return 0
	}
	return measureMem(m.db)
}

// measureMem is what a memory store holds: its memtables, its in-memory
// tables and its block cache. Not counted: a memtable's arena that Pebble
// keeps for reuse or a reader still pins after a flush (at most the 4 MiB
// of one memtable).
func measureMem(db *pebble.DB) int64 {
	mt := db.Metrics()
	return int64(mt.MemTable.Size) + int64(mt.DiskSpaceUsage()) + mt.BlockCache.Size
}

// close releases the store when its handle is done with (a deleted
// namespace, a restore, the store's close): its indexes are gone.
func (m *memIndexes) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.db != nil {
		m.db.Close()
		m.cache.Unref()
		m.db, m.cache = nil, nil
	}
	m.ids.Store(nil)
	m.bytes.Store(0)
}

// indexBatch is a round's batch: ns.db's indexed batch, and the memory
// store's for the keys of memory indexes. Every read and write of the
// round goes through it, so the loop's code is the same in both modes.
type indexBatch struct {
	disk *pebble.Batch
	mem  *pebble.Batch // nil while no memory index is routed
	m    *memIndexes
	ids  map[uint64]bool
}

func (b *indexBatch) pick(k []byte) *pebble.Batch {
	if b.mem != nil && b.m.routes(b.ids, k) {
		return b.mem
	}
	return b.disk
}

func (b *indexBatch) Get(k []byte) ([]byte, io.Closer, error) { return b.pick(k).Get(k) }
func (b *indexBatch) Set(k, v []byte, o *pebble.WriteOptions) error {
	return b.pick(k).Set(k, v, o)
}
func (b *indexBatch) Delete(k []byte, o *pebble.WriteOptions) error { return b.pick(k).Delete(k, o) }

// DeleteRange and NewIter route by their lower bound: every range the
// loop uses lies within one index's keys of one prefix.
func (b *indexBatch) DeleteRange(lo, hi []byte, o *pebble.WriteOptions) error {
	return b.pick(lo).DeleteRange(lo, hi, o)
}

func (b *indexBatch) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	return b.pick(o.LowerBound).NewIter(o)
}

// Len is the bytes of both batches.
func (b *indexBatch) Len() int64 {
	n := int64(b.disk.Len())
	if b.mem != nil {
		n += int64(b.mem.Len())
	}
	return n
}

func (b *indexBatch) Count() uint32 {
	n := b.disk.Count()
	if b.mem != nil {
		n += b.mem.Count()
	}
	return n
}

// Commit commits the memory batch first: a round whose disk batch then
// fails leaves its change records in place, and applying them again is
// harmless (indexer.go), while the reverse order could prune records the
// memory index never applied.
func (b *indexBatch) Commit(o *pebble.WriteOptions) error {
	if b.mem != nil && b.mem.Count() > 0 {
		if err := b.mem.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("memory index store: %w", err)
		}
	}
	return b.disk.Commit(o)
}

func (b *indexBatch) Close() error {
	err := b.disk.Close()
	if b.mem != nil {
		err = errors.Join(err, b.mem.Close())
	}
	return err
}

// routeMemory opens the memory store when the namespace has memory
// indexes (defs as stored, with their pending rebuilds) and routes their
// keys through the round's batch.
func (r *indexRound) routeMemory(defs map[string]*fsmv1.IndexDefinition) error {
	var ids []uint64
	for _, d := range defs {
		for _, x := range []*fsmv1.IndexDefinition{d, d.Next} {
			if x != nil && r.s.isMemoryIndex(x) {
				ids = append(ids, x.Id)
			}
		}
	}
	m := &r.ns.memIdx
	r.memLive = make(map[uint64]bool, len(ids))
	for _, id := range ids {
		r.memLive[id] = true
	}
	if len(ids) == 0 && m.ids.Load() == nil {
		return nil
	}
	db, err := m.open(r.s, ids)
	if err != nil {
		return err
	}
	r.b.m, r.b.ids, r.b.mem = m, *m.ids.Load(), db.NewIndexedBatch()
	// A round's memory batch is what the store may grow by before it is
	// measured: a small share of the limit, so an index fails near it.
	r.batchLimit = min(r.batchLimit, max(r.s.memoryLimit()/memBatchShare, 64<<10))
	return nil
}

// memBatchShare: a round writes at most 1/memBatchShare of the memory
// limit to the memory store (routeMemory).
const memBatchShare = 16

// memoryLimit is Options.IndexMemoryLimit or its default.
func (s *Store) memoryLimit() int64 {
	if s.opts.IndexMemoryLimit > 0 {
		return s.opts.IndexMemoryLimit
	}
	return DefaultIndexMemoryLimit
}

// checkMemory measures the memory store after a round and fails the
// memory indexes the round wrote when it holds more than the limit: it
// drops their keys, so the store shrinks back, and the others go on.
func (s *Store) checkMemory(ns *namespace, r *indexRound) error {
	m := &ns.memIdx
	size := m.size()
	m.bytes.Store(size)
	if limit := s.memoryLimit(); size > limit {
		return s.failMemory(ns, r, r.wrote(), size, limit)
	}
	return nil
}

// overMemory reports whether committing the round's memory batch would
// take the memory store past the limit, and fails the memory indexes the
// round wrote if so (failed: the caller drops the round, as for any
// failure, and the next round maintains the others). The batch's bytes
// are what the store grows by, near enough: its keys and values, which
// the memtable copies.
func (s *Store) overMemory(ns *namespace, r *indexRound) (failed bool, err error) {
	if r.b.mem == nil || r.b.mem.Len() == 0 {
		return false, nil
	}
	m := &ns.memIdx
	size, limit := m.size()+int64(r.b.mem.Len()), s.memoryLimit()
	if size <= limit {
		return false, nil
	}
	ids := m.ids.Load()
	var wrote []uint64
	for _, id := range r.wrote() {
		if ids != nil && (*ids)[id] {
			wrote = append(wrote, id)
		}
	}
	if len(wrote) == 0 {
		return false, nil
	}
	return true, s.failMemory(ns, r, wrote, size, limit)
}

// failMemory fails the memory indexes among ids, size being what their
// store holds or would hold, drops their keys and gives their memory back.
func (s *Store) failMemory(ns *namespace, r *indexRound, ids []uint64, size, limit int64) error {
	m := &ns.memIdx
	routed := m.ids.Load()
	var failed []uint64
	for _, id := range ids {
		if routed == nil || !(*routed)[id] {
			continue
		}
		reason := fmt.Sprintf("the memory indexes of its namespace hold %d bytes on this node, "+
			"more than the limit of %d (--index-memory-limit)", size, limit)
		f := &indexFailure{id: id, reason: reason}
		if err := s.recordFailure(ns, r, f); err != nil {
			return err
		}
		failed = append(failed, id)
	}
	return m.drop(failed)
}

// drop deletes every key of the indexes ids from the store and gives
// their memory back at once (tombstones and the old tables would hold it
// until a later compaction), so the siblings that keep writing are
// measured without them.
func (m *memIndexes) drop(ids []uint64) error {
	if len(ids) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.db == nil {
		return nil
	}
	for _, id := range ids {
		for _, p := range [][]byte{indexEntryPrefix(id), appendUint64(append([]byte(nil), prefixIndexReverse...), id),
			indexCkptKey(id), appendUint64(append([]byte(nil), prefixIndexStream...), id)} {
			end := prefixEnd(p)
			if bytes.Equal(p, indexCkptKey(id)) {
				end = append(bytes.Clone(p), 0)
			}
			if err := m.db.DeleteRange(p, end, pebble.NoSync); err != nil {
				return fmt.Errorf("drop memory index %d: %w", id, err)
			}
		}
	}
	return m.compactLocked()
}

// compactLocked flushes and compacts the store's index keys, so dropped
// keys and their tombstones go. Not while a reader's snapshot is open: the
// compaction would keep what the snapshot sees, beside the tombstones,
// in tables no later manual compaction rewrites; the first round that
// finds no snapshot open compacts instead (reclaimIfIdle), and until then
// the store measures what it still holds. m.mu is held.
func (m *memIndexes) compactLocked() error {
	if m.reclaim = m.db.Metrics().Snapshots.Count > 0; m.reclaim {
		return nil
	}
	if err := m.db.Flush(); err != nil {
		return fmt.Errorf("flush memory index store: %w", err)
	}
	if err := m.db.Compact(context.Background(), []byte("X"), []byte("Y"), true); err != nil {
		return fmt.Errorf("compact memory index store: %w", err)
	}
	m.bytes.Store(measureMem(m.db))
	return nil
}

// reclaimIfIdle compacts the store when a drop left keys because a
// reader held a snapshot, and none does now.
func (m *memIndexes) reclaimIfIdle() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.db == nil || !m.reclaim || m.db.Metrics().Snapshots.Count > 0 {
		return nil
	}
	return m.compactLocked()
}

// release gives back what the indexes ids held (dropped by a round's
// committed batch: deleted, or replaced by their rebuild) and stops
// routing those of them no definition names any more (live: the ids the
// round routed from the stored definitions). Their keys are gone from the
// store already; a later record naming them deletes nothing wherever it
// is routed.
func (m *memIndexes) release(ids []uint64, live map[uint64]bool) error {
	old := m.ids.Load()
	if old == nil {
		return nil
	}
	var held []uint64
	for _, id := range ids {
		if (*old)[id] {
			held = append(held, id)
		}
	}
	if len(held) == 0 {
		return nil
	}
	if err := m.drop(held); err != nil {
		return err
	}
	next := make(map[uint64]bool, len(*old))
	for id := range *old {
		next[id] = true
	}
	for _, id := range held {
		if !live[id] {
			delete(next, id)
		}
	}
	m.ids.Store(&next)
	return nil
}

// memoryBytes is the size of the memory store holding d (0 when d keeps
// its entries on disk).
func (v *View) memoryBytes(d *fsmv1.IndexDefinition) int64 {
	if v.memIDs[d.Id] {
		return v.ns.memIdx.bytes.Load()
	}
	return 0
}

// indexReader reads node-local index keys from the view's snapshot of
// the store that holds them.
type indexReader struct{ v *View }

func (r indexReader) Get(k []byte) ([]byte, io.Closer, error) {
	if r.v.memSnap != nil && r.v.ns.memIdx.routes(r.v.memIDs, k) {
		return r.v.memSnap.Get(k)
	}
	return r.v.snap.Get(k)
}

// wrote lists the indexes whose keys the round changed.
func (r *indexRound) wrote() []uint64 {
	out := make([]uint64, 0, len(r.dirty))
	for id := range r.dirty {
		out = append(out, id)
	}
	return out
}

// liveIndexReader reads node-local index keys from the live store that
// holds them.
type liveIndexReader struct{ ns *namespace }

func (r liveIndexReader) Get(k []byte) ([]byte, io.Closer, error) {
	m := &r.ns.memIdx
	if ids := m.ids.Load(); ids != nil && m.routes(*ids, k) {
		m.mu.Lock()
		db := m.db
		if db == nil {
			m.mu.Unlock()
			return nil, nil, pebble.ErrNotFound
		}
		v, closer, err := db.Get(k)
		m.mu.Unlock()
		return v, closer, err
	}
	return r.ns.db.Get(k)
}
