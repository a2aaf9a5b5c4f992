package fsm

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/durable"
)

// namespace is one namespace's registry entry and, while open, its database.
//
// The fields under "guarded by Store.mu" change only with Store.mu held. A
// handle with refs > 0 is never closed; a deleted namespace is closed and its
// directory removed when its last reference is released.
type namespace struct {
	rec *fsmv1.NamespaceRecord // immutable
	dir string                 // absolute directory

	// guarded by Store.mu
	db         *pebble.DB
	refs       int
	deleted    bool
	prev, next *namespace // position in Store.mu.lru while open
	// creds are the namespace's credentials by id (credential.go); never
	// changed in place: apply replaces the map at commit.
	creds map[uint64]*fsmv1.CredentialRecord

	// Apply state, loaded when the database opens and owned by the holder of
	// Store.applyMu (which also holds a reference, so the database stays
	// open while it is used).
	applied appliedRecord
	nextGP  int64
	counts  nsCounts
	// dedupeClock is the committed DC value (dedupe.go).
	dedupeClock int64
	// idf mirrors the committed id index in memory (idfilter.go); nil
	// until apply first needs it after the database opened and its
	// background load (idfLoad, nil when none runs) is done.
	idf     *idFilter
	idfLoad *idFilterLoad
	// retention holds the namespace's retention policies (nil: none),
	// loaded with the database and changed in place by apply.
	retention *retention
	// typeIndex is the committed state of the type index (typeindex.go).
	typeIndex typeIndexState
	// indexes are the user-defined indexes by name (index.go), loaded
	// with the database and changed in place by apply.
	indexes map[string]*fsmv1.IndexDefinition
	// indexer is the node-local state of the index loop (indexer.go).
	indexer indexerState
	// memIdx holds the entries of memory-mode indexes (indexmem.go); it
	// lives as long as the handle, not its database.
	memIdx memIndexes
	// stale: an ApplyBatch that staged changes to this namespace was
	// abandoned (to wait for a resource) and may have changed the fields
	// above in place; apply reloads them from the database before it
	// uses the namespace again.
	stale bool
	// metaCache holds committed VI and CC values (absent streams as a
	// zero count), so apply reads the database only for streams it has not
	// seen lately. Filled only by commit: it never holds staged state.
	metaCache metaCache
	// sets is the staging space of the namespace's batches, kept between
	// ApplyBatch calls so its buffers are allocated once.
	sets sortedSets
}

// maxCachedStreams bounds a namespace's metaCache.
const maxCachedStreams = 1 << 14

type metaCache struct {
	streams map[string]streamMeta
	cats    map[string]catCounts
}

func (c *metaCache) reset() { c.streams, c.cats = nil, nil }

func (c *metaCache) putStream(name string, m streamMeta) {
	if c.streams == nil {
		c.streams = make(map[string]streamMeta)
	}
	if len(c.streams) >= maxCachedStreams {
		// Drop about a quarter, chosen by map order (effectively random).
		n := 0
		for k := range c.streams {
			delete(c.streams, k)
			if n++; n >= maxCachedStreams/4 {
				break
			}
		}
	}
	c.streams[name] = m
}

func (c *metaCache) putCat(name string, cc catCounts) {
	if c.cats == nil {
		c.cats = make(map[string]catCounts)
	}
	if len(c.cats) >= maxCachedStreams {
		clear(c.cats)
	}
	c.cats[name] = cc
}

func (s *Store) newNamespace(rec *fsmv1.NamespaceRecord) *namespace {
	return &namespace{rec: rec, dir: s.fs.PathJoin(s.opts.Dir, "ns", dirName(rec.Id))}
}

func (ns *namespace) dirName() string { return dirName(ns.rec.Id) }

// acquire returns the open namespace name with a reference taken; release
// it with Store.release.
func (s *Store) acquire(name string) (*namespace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.mu.restoring {
		s.mu.cond.Wait()
	}
	if s.mu.closed {
		return nil, ErrClosed
	}
	ns, ok := s.mu.namespaces[name]
	if !ok {
		return nil, ErrNamespaceNotFound
	}
	if err := s.refLocked(ns); err != nil {
		return nil, err
	}
	return ns, nil
}

// refLocked opens ns if needed and takes a reference.
func (s *Store) refLocked(ns *namespace) error {
	if ns.db == nil {
		if err := s.openNamespaceLocked(ns); err != nil {
			return err
		}
	}
	ns.refs++
	s.mu.lru.moveToFront(ns)
	return nil
}

func (s *Store) release(ns *namespace) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(ns)
}

func (s *Store) releaseLocked(ns *namespace) {
	ns.refs--
	if ns.refs > 0 {
		return
	}
	s.mu.cond.Broadcast()
	if ns.deleted {
		s.dropLocked(ns)
		return
	}
	s.evictLocked()
}

// dropLocked closes a deleted namespace and removes its directory.
func (s *Store) dropLocked(ns *namespace) {
	ns.memIdx.close()
	if err := s.closeNamespaceLocked(ns); err != nil {
		s.log.Error("close deleted namespace", "namespace", ns.rec.Name, "err", err)
	}
	if err := s.fs.RemoveAll(ns.dir); err != nil {
		// Open removes it as an orphan next time.
		s.log.Error("remove deleted namespace directory", "namespace", ns.rec.Name, "dir", ns.dir, "err", err)
	}
}

// evictLocked closes least recently used idle namespaces while more than
// MaxOpenNamespaces are open.
func (s *Store) evictLocked() {
	for e := s.mu.lru.back; e != nil && s.mu.lru.len > s.opts.MaxOpenNamespaces; {
		prev := e.prev
		if e.refs == 0 {
			if err := s.closeNamespaceLocked(e); err != nil {
				s.log.Error("close idle namespace", "namespace", e.rec.Name, "err", err)
			}
		}
		e = prev
	}
}

// openNamespaceLocked opens the database of ns and loads its apply state.
func (s *Store) openNamespaceLocked(ns *namespace) error {
	if err := durable.MkdirAll(s.fs, ns.dir); err != nil {
		return fmt.Errorf("fsm: create namespace %q: %w", ns.rec.Name, err)
	}
	db, err := s.pc.open(ns.dir, fmt.Sprintf("namespace %q", ns.rec.Name))
	if err != nil {
		return fmt.Errorf("fsm: open namespace %q: %w", ns.rec.Name, err)
	}
	if err := ns.load(db); err != nil {
		db.Close()
		return err
	}
	ns.db = db
	s.mu.lru.pushFront(ns)
	return nil
}

// load reads the apply state of ns from db (its database) into ns: what
// apply keeps in memory between calls. It clears stale.
func (ns *namespace) load(db *pebble.DB) error {
	applied, nextGP, counts, err := loadApplyState(db)
	if err != nil {
		return fmt.Errorf("fsm: load namespace %q: %w", ns.rec.Name, err)
	}
	clock := int64(0)
	if v, gerr := get(db, keyDedupeClock); gerr != nil || v != nil {
		if err = gerr; err == nil {
			clock, err = decodeUint64(v)
		}
		if err != nil {
			return fmt.Errorf("fsm: load namespace %q dedupe clock: %w", ns.rec.Name, err)
		}
	}
	rt, err := loadRetention(db)
	if err != nil {
		return fmt.Errorf("fsm: load namespace %q retention policies: %w", ns.rec.Name, err)
	}
	ti, err := loadTypeIndex(db)
	if err != nil {
		return fmt.Errorf("fsm: load namespace %q type index state: %w", ns.rec.Name, err)
	}
	idx, err := loadIndexes(db)
	if err != nil {
		return fmt.Errorf("fsm: load namespace %q indexes: %w", ns.rec.Name, err)
	}
	ns.indexes = idx
	ns.applied, ns.nextGP, ns.counts, ns.dedupeClock = applied, nextGP, counts, clock
	ns.retention, ns.typeIndex = rt, ti
	ns.dropIDFilter()
	ns.stale = false
	return nil
}

func loadApplyState(db *pebble.DB) (applied appliedRecord, nextGP int64, counts nsCounts, err error) {
	nextGP = 1
	if v, err := get(db, keyApplied); err != nil {
		return applied, 0, counts, err
	} else if v != nil {
		if applied, err = decodeApplied(v); err != nil {
			return applied, 0, counts, err
		}
	}
	if v, err := get(db, keyNextGP); err != nil {
		return applied, 0, counts, err
	} else if v != nil {
		if nextGP, err = decodeUint64(v); err != nil {
			return applied, 0, counts, err
		}
	}
	if v, err := get(db, keyNSCounts); err != nil {
		return applied, 0, counts, err
	} else if v != nil {
		if counts, err = decodeNSCounts(v); err != nil {
			return applied, 0, counts, err
		}
	}
	return applied, nextGP, counts, nil
}

// closeNamespaceLocked makes the WAL of ns durable and closes it. A closed
// namespace needs no further sync before a durable floor is recorded.
func (s *Store) closeNamespaceLocked(ns *namespace) error {
	if ns.db == nil {
		return nil
	}
	s.mu.lru.remove(ns)
	ns.dropIDFilter() // its load's iterator must close before the database
	db := ns.db
	ns.db = nil
	syncErr := db.LogData(nil, pebble.Sync)
	if err := db.Close(); err != nil {
		return fmt.Errorf("fsm: close namespace %q: %w", ns.rec.Name, err)
	}
	if syncErr != nil {
		return fmt.Errorf("fsm: sync namespace %q: %w", ns.rec.Name, syncErr)
	}
	return nil
}

// dropIDFilter forgets the id filter and cancels its load, if one runs
// (waiting for its iterator to close); apply reloads it when next needed.
func (ns *namespace) dropIDFilter() {
	if ns.idfLoad != nil {
		ns.idfLoad.cancel()
		ns.idfLoad = nil
	}
	ns.idf = nil
}

// lruList is an intrusive doubly linked list of open namespaces.
type lruList struct {
	front, back *namespace
	len         int
}

func (l *lruList) pushFront(ns *namespace) {
	ns.prev, ns.next = nil, l.front
	if l.front != nil {
		l.front.prev = ns
	} else {
		l.back = ns
	}
	l.front = ns
	l.len++
}

func (l *lruList) remove(ns *namespace) {
	if ns.prev != nil {
		ns.prev.next = ns.next
	} else {
		l.front = ns.next
	}
	if ns.next != nil {
		ns.next.prev = ns.prev
	} else {
		l.back = ns.prev
	}
	ns.prev, ns.next = nil, nil
	l.len--
}

func (l *lruList) moveToFront(ns *namespace) {
	if l.front == ns {
		return
	}
	l.remove(ns)
	l.pushFront(ns)
}
