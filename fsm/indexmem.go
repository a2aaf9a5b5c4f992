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
	mu sync.Mutex // opening and closing db
	db *pebble.DB
	// ids are the indexes routed here: every memory index the handle's
	// rounds met (a deleted one's keys go with the store). Replaced whole
	// (copy on write), so a view reads it with one atomic load.
	ids atomic.Pointer[map[uint64]bool]
	// bytes is the store's size after the last round (memtables and the
	// in-memory tables).
	bytes atomic.Int64
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
		db, err := pebble.Open("", &pebble.Options{
			FS: vfs.NewMem(), DisableWAL: true, Logger: pebbleLogger{s.log},
			// Small: the store is sized by what it holds, not by a
			// write rate (memory is the bound, not flush cost).
			MemTableSize: 4 << 20,
		})
		if err != nil {
			return nil, fmt.Errorf("open memory index store: %w", err)
		}
		m.db = db
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

// size measures the store: its memtables and in-memory tables.
func (m *memIndexes) size() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.db == nil {
		return 0
	}
	mt := m.db.Metrics()
	return int64(mt.MemTable.Size) + int64(mt.DiskSpaceUsage())
}

// close releases the store when its handle is done with (a deleted
// namespace, a restore, the store's close): its indexes are gone.
func (m *memIndexes) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.db != nil {
		m.db.Close()
		m.db = nil
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
	if len(ids) == 0 && m.ids.Load() == nil {
		return nil
	}
	db, err := m.open(r.s, ids)
	if err != nil {
		return err
	}
	r.b.m, r.b.ids, r.b.mem = m, *m.ids.Load(), db.NewIndexedBatch()
	return nil
}

// checkMemory measures the memory store after a round and fails the
// memory indexes the round wrote when it holds more than the limit: it
// drops their keys, so the store shrinks back, and the others go on.
func (s *Store) checkMemory(ns *namespace, wrote []uint64) error {
	m := &ns.memIdx
	size := m.size()
	m.bytes.Store(size)
	limit := s.opts.IndexMemoryLimit
	if limit <= 0 {
		limit = DefaultIndexMemoryLimit
	}
	if size <= limit {
		return nil
	}
	ids := m.ids.Load()
	failed := false
	for _, id := range wrote {
		if ids == nil || !(*ids)[id] {
			continue
		}
		f := &indexFailure{id: id, reason: fmt.Sprintf("the memory indexes of its namespace hold %d bytes on this node, more than the limit of %d (--index-memory-limit)", size, limit)}
		if err := s.recordFailure(ns, f); err != nil {
			return err
		}
		m.mu.Lock()
		if m.db != nil {
			for _, p := range [][]byte{indexEntryPrefix(id), appendUint64(append([]byte(nil), prefixIndexReverse...), id), indexCkptKey(id),
				appendUint64(append([]byte(nil), prefixIndexStream...), id)} {
				end := prefixEnd(p)
				if bytes.Equal(p, indexCkptKey(id)) {
					end = append(bytes.Clone(p), 0)
				}
				if err := m.db.DeleteRange(p, end, pebble.NoSync); err != nil {
					m.mu.Unlock()
					return fmt.Errorf("drop memory index %d: %w", id, err)
				}
			}
		}
		m.mu.Unlock()
		failed = true
	}
	if failed {
		// Give the memory back now (tombstones and the old tables would
		// hold it until a later compaction), so the siblings that keep
		// writing are measured without the failed ones.
		m.mu.Lock()
		if m.db != nil {
			if err := m.db.Flush(); err != nil {
				m.mu.Unlock()
				return fmt.Errorf("flush memory index store: %w", err)
			}
			if err := m.db.Compact(context.Background(), []byte("X"), []byte("Y"), true); err != nil {
				m.mu.Unlock()
				return fmt.Errorf("compact memory index store: %w", err)
			}
		}
		m.mu.Unlock()
		m.bytes.Store(m.size())
	}
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
