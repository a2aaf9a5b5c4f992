package fsm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/jsonscan"
)

// The index loop's step (DESIGN.md, User-defined indexes). The node runs
// one loop per namespace with indexes; each step (IndexRound) reads one
// snapshot of the namespace's database and, in one Pebble batch:
//
//  1. applies the change log (XL, index.go) in log order: a removed run
//     deletes its entries through the reverse keys (XV id gp -> fields),
//     an added run indexes those messages for each index whose checkpoint
//     is past them, a clear drops every entry and resets every
//     checkpoint, a dropped index loses its entries and checkpoint; then
//     deletes the records;
//  2. reads the messages above each index's checkpoint (M, in global
//     order) and writes an entry (XE id fields gp) and its reverse key for
//     each matching message; a message whose field is missing or of
//     another type is skipped and counted;
//  3. writes each index's checkpoint (XC id: last global position read,
//     or the namespace's last one when the scan reached the end; entries,
//     skipped).
//
// Entries, reverse keys and checkpoints have one writer, the loop (apply
// writes definitions and the change log only), and rounds of one
// namespace are serialized, so reading them through the batch over the
// live database equals reading the snapshot plus the round's own writes.
// Messages are read from the snapshot: the final state of the log prefix
// it holds. Why that is enough: an entry exists only for a global
// position at or below its index's checkpoint; a message present in the
// snapshot at or below the checkpoint was either indexed when read and
// never removed since (a removal stages a record), or put there by an
// import later (an added record); a position removed after it was indexed
// has a removed record, and one removed before was never read. So after a
// step that reached the end of the snapshot, each index holds exactly the
// matching messages of the snapshot, whatever the order of its records.

// DefaultIndexRoundMessages bounds the messages one IndexRound reads and
// the change records it applies (each record's entries count as read).
const DefaultIndexRoundMessages = 10_000

// A round also ends once it read DefaultIndexRoundReadBytes of messages
// or staged DefaultIndexRoundBatchBytes to write (Options.IndexRoundReadBytes,
// Options.IndexRoundBatchBytes), whichever comes first, so the memory a
// round holds does not grow with the size of the messages. Both are
// checked before each message and between chunks of a change record, so
// a round passes them by at most one message read (and its entries), or
// one chunk of a record (indexRunChunk positions). The next round starts
// at once (More).
const (
	DefaultIndexRoundReadBytes  = 16 << 20
	DefaultIndexRoundBatchBytes = 4 << 20
)

// indexerState is a namespace's node-local index progress in memory.
type indexerState struct {
	round sync.Mutex // serializes rounds of the namespace
	// covered: the indexes hold every message of every entry up to this
	// applied index (0: not known yet).
	covered atomic.Uint64
	// byIndex: index id -> the applied index up to which that index holds
	// every message (DESIGN.md, Per-index coverage). Replaced whole by
	// each round that covers an index (copy on write), so a view loads it
	// with one atomic read before taking its snapshot.
	byIndex atomic.Pointer[map[uint64]uint64]
	// rate is the messages per second the last rounds that read any
	// read (math.Float64bits; 0: not known yet), for the ETA of a build.
	rate atomic.Uint64
	// paused is the number of paused indexes the last round saw.
	paused atomic.Int64
}

// indexWake is closed and replaced when some namespace's covered index
// grows (WaitIndexed).
type indexWake struct {
	mu sync.Mutex
	ch chan struct{}
}

func (w *indexWake) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

func (w *indexWake) broadcast() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// IndexRoundResult is what one IndexRound did.
type IndexRoundResult struct {
	// Indexes is the number of indexes the namespace has.
	Indexes int
	// Read is the messages read above checkpoints (and through added
	// records); Indexed the entries written; Skipped the messages that
	// matched a source but lacked a field; Removed the entries deleted.
	Read, Indexed, Skipped, Removed int64
	// TooLarge is the skipped messages whose string field was longer than
	// MaxIndexValueBytes (counted in Skipped too).
	TooLarge int64
	// ReadBytes is the bytes of the messages read; BatchBytes the bytes
	// of the batches the round committed (disk and memory store).
	ReadBytes, BatchBytes int64
	// Changes is the change records applied.
	Changes int
	// More: the round stopped at its bound; call again.
	More bool
	// Covered is the applied index every index now covers (when !More).
	Covered uint64
	// CoveredIDs are the indexes that reached the end of the round's
	// snapshot (every change record applied too): each now covers the
	// applied index read before it, even when More (a sibling still
	// builds).
	CoveredIDs []uint64
	// Failed are the indexes the round failed on this node (an error
	// confined to each: indexstate.go); the next round maintains the
	// others.
	Failed []IndexFailure
}

// IndexCounters are the store's running totals of index work, for tests
// and metrics: Read counts every message the loops read.
type IndexCounters struct{ Read, Indexed, Skipped, TooLarge, Removed, Failures int64 }

// IndexCounters returns the totals since the store opened.
func (s *Store) IndexCounters() IndexCounters {
	return IndexCounters{
		Read: s.indexTotals.read.Load(), Indexed: s.indexTotals.indexed.Load(),
		Skipped: s.indexTotals.skipped.Load(), TooLarge: s.indexTotals.tooLarge.Load(),
		Removed: s.indexTotals.removed.Load(), Failures: s.indexTotals.failures.Load(),
	}
}

type indexTotals struct{ read, indexed, skipped, tooLarge, removed, failures atomic.Int64 }

// indexCkpt is the value of an XC key: the last global position read (or
// passed at the end of the namespace: scan), the entries and skipped
// messages, and whether a round ever reached the end of the namespace
// since the index was created or cleared (built: the index is healthy,
// else building).
type indexCkpt struct {
	gp, entries, skipped int64
	built                bool
}

func (c indexCkpt) encode() []byte {
	b := make([]byte, 0, 32)
	b = appendUint64(b, uint64(c.gp))
	b = appendUint64(b, uint64(c.entries))
	b = appendUint64(b, uint64(c.skipped))
	var flags uint64
	if c.built {
		flags = 1
	}
	return appendUint64(b, flags)
}

func decodeIndexCkpt(v []byte) (indexCkpt, error) {
	if len(v) != 32 {
		return indexCkpt{}, errCorruptValue
	}
	u := func(i int) int64 { return int64(binary.BigEndian.Uint64(v[i*8:])) }
	return indexCkpt{u(0), u(1), u(2), u(3)&1 != 0}, nil
}

// IndexRound does one bounded step of namespace name's index maintenance
// (see the top of this file), reading at most maxMessages messages and
// change records (<= 0: DefaultIndexRoundMessages). It returns
// ErrNamespaceNotFound once the namespace is gone. Safe to call
// concurrently with apply and reads; rounds of one namespace wait for
// each other.
func (s *Store) IndexRound(name string, maxMessages int) (IndexRoundResult, error) {
	if maxMessages <= 0 {
		maxMessages = DefaultIndexRoundMessages
	}
	ns, err := s.acquire(name)
	if err != nil {
		return IndexRoundResult{}, err
	}
	defer s.release(ns)
	ns.indexer.round.Lock()
	defer ns.indexer.round.Unlock()

	// Every entry up to applied is committed: the snapshot holds it.
	applied := s.applied.Load()
	snap := ns.db.NewSnapshot()
	defer snap.Close()
	r := &indexRound{s: s, ns: ns, snap: snap, budget: int64(maxMessages), ckpts: map[uint64]*indexCkpt{},
		readLimit: s.opts.IndexRoundReadBytes, batchLimit: s.opts.IndexRoundBatchBytes}
	r.b = &indexBatch{disk: ns.db.NewIndexedBatch()}
	defer r.b.Close()
	start := time.Now()
	res, err := r.run()
	if f, ok := asIndexFailure(err); ok {
		// Confined to one index: drop the round, fail that index, and let
		// the next round maintain the others (indexstate.go).
		if err := s.recordFailure(ns, r, f); err != nil {
			return IndexRoundResult{}, fmt.Errorf("fsm: namespace %q: %w", name, err)
		}
		return IndexRoundResult{Indexes: res.Indexes, More: true, Failed: r.failedIndexes(name)}, nil
	}
	if err != nil {
		return res, fmt.Errorf("fsm: namespace %q: index round: %w", name, err)
	}
	// One batch, in order: the indexed batch's writes (change records,
	// stream indexes), the event indexes' new entries in key order, then
	// finish's. The new entries never meet the indexed batch's keys (they
	// are above every checkpoint the records dealt with), and the copy
	// into a plain batch indexes nothing again. Memory indexes' keys
	// (indexmem.go) stay in the round's memory batch, committed first.
	// Sized at once: the scan's entries and the indexed batch's writes,
	// and room for finish's checkpoints and drops.
	size := int(r.b.disk.Len()) + len(r.sets.arena) + len(r.sets.kvs)*stagedOverhead +
		64*(len(r.dirty)+len(r.replaces)+1)
	commit := &indexBatch{disk: ns.db.NewBatchWithSize(size), mem: r.b.mem, m: r.b.m, ids: r.b.ids}
	defer commit.disk.Close()
	if err := commit.disk.Apply(r.b.disk, nil); err != nil {
		return res, fmt.Errorf("fsm: namespace %q: index round: %w", name, err)
	}
	if err := flushDistinct(&r.sets, commit); err != nil {
		return res, fmt.Errorf("fsm: namespace %q: index round: %w", name, err)
	}
	if err := r.finish(commit); err != nil {
		return res, fmt.Errorf("fsm: namespace %q: index round: %w", name, err)
	}
	if failed, err := s.overMemory(ns, r); err != nil || failed { // indexmem.go
		if err != nil {
			return IndexRoundResult{}, fmt.Errorf("fsm: namespace %q: %w", name, err)
		}
		return IndexRoundResult{Indexes: res.Indexes, More: true, Failed: r.failedIndexes(name)}, nil // as for any failure
	}
	res.BatchBytes = commit.Len()
	if commit.Count() > 0 {
		if err := commit.Commit(pebble.NoSync); err != nil {
			return res, fmt.Errorf("fsm: namespace %q: commit index round: %w", name, err)
		}
	}
	if r.b.mem != nil {
		if err := ns.memIdx.release(r.dropped, r.memLive); err != nil {
			return res, fmt.Errorf("fsm: namespace %q: %w", name, err)
		}
		if err := ns.memIdx.reclaimIfIdle(); err != nil {
			return res, fmt.Errorf("fsm: namespace %q: %w", name, err)
		}
		if err := s.checkMemory(ns, r); err != nil {
			return res, fmt.Errorf("fsm: namespace %q: %w", name, err)
		}
		res.Failed = r.failedIndexes(name)
	}
	if res.Read >= 1000 {
		// A moving average over the rounds that read enough to measure.
		rate := float64(res.Read) / max(time.Since(start).Seconds(), 1e-9)
		if old := math.Float64frombits(ns.indexer.rate.Load()); old > 0 {
			rate = 0.7*old + 0.3*rate
		}
		ns.indexer.rate.Store(math.Float64bits(rate))
	}
	t := &s.indexTotals
	t.read.Add(res.Read)
	t.indexed.Add(res.Indexed)
	t.skipped.Add(res.Skipped)
	t.tooLarge.Add(res.TooLarge)
	t.removed.Add(res.Removed)
	wake := ns.indexer.cover(r.defs, res.CoveredIDs, applied)
	if n := int64(len(r.paused)); ns.indexer.paused.Swap(n) != n {
		wake = true // readers waiting for a now paused index fail at once
	}
	if !res.More {
		res.Covered = applied
		if ns.indexer.covered.Load() < applied {
			ns.indexer.covered.Store(applied)
			wake = true
		}
	}
	if wake {
		s.indexWake.broadcast()
	}
	return res, nil
}

// cover records that the indexes ids cover applied, forgets the indexes
// not in defs (deleted), and reports whether anything grew. Rounds of a
// namespace are serialized: the only writer.
func (st *indexerState) cover(defs []*fsmv1.IndexDefinition, ids []uint64, applied uint64) bool {
	old := st.coverage()
	next := make(map[uint64]uint64, len(defs))
	for _, d := range defs {
		if c, ok := old[d.Id]; ok {
			next[d.Id] = c
		}
	}
	grew := len(next) != len(old)
	for _, id := range ids {
		if next[id] < applied {
			next[id] = applied
			grew = true
		}
	}
	if grew {
		st.byIndex.Store(&next)
	}
	return grew
}

// coverage is the per-index coverage (read only; nil before any round).
func (st *indexerState) coverage() map[uint64]uint64 {
	if p := st.byIndex.Load(); p != nil {
		return *p
	}
	return nil
}

// indexRound is the state of one IndexRound.
type indexRound struct {
	s      *Store
	ns     *namespace
	snap   *pebble.Snapshot
	b      *indexBatch // indexed: reads see its writes over the live database (and memory store, indexmem.go)
	budget int64
	defs   []*fsmv1.IndexDefinition
	ckpts  map[uint64]*indexCkpt // by index id, loaded on first use
	dirty  map[uint64]bool

	// readLimit and batchLimit bound the bytes of messages read and of
	// writes staged (spent).
	readLimit, batchLimit int64

	// replaces: a building rebuild's id -> the id of the definition it
	// replaces once built.
	replaces map[uint64]uint64
	// paused: indexes that take change records but no scan (indexstate.go).
	paused map[uint64]bool
	key    []byte
	fields []byte                         // entryFields's buffer
	toks   map[*fsmv1.IndexField][]string // pointerTokens, by field

	// dropped: the indexes whose keys the round dropped (deleted, or
	// replaced by their rebuild); memLive: the memory indexes the stored
	// definitions name (indexmem.go).
	dropped []uint64
	memLive map[uint64]bool

	// sets are the event indexes' new entries and reverse keys from the
	// scan, staged apart from b (nothing in the round reads them back)
	// and committed in key order: no batch index to maintain, and the
	// memtable inserts runs of neighbours.
	sets sortedSets
	res  IndexRoundResult
	// last is the snapshot's next global position (lastPosition; 0: not
	// read yet).
	last int64
	// names: index id -> name, of the stored definitions and their
	// rebuilds; failed: the failures the round recorded.
	names  map[uint64]string
	failed []*indexFailure
}

func (r *indexRound) run() (IndexRoundResult, error) {
	defs, err := loadIndexes(r.snap)
	if err != nil {
		return r.res, err
	}
	r.names = make(map[uint64]string, len(defs))
	for _, d := range defs {
		r.names[d.Id] = d.Name
		if d.Next != nil {
			r.names[d.Next.Id] = d.Name
		}
	}
	if err := r.routeMemory(defs); err != nil { // indexmem.go
		return r.res, err
	}
	if r.defs, err = r.roundDefs(sortedIndexes(defs)); err != nil {
		return r.res, err
	}
	if err := r.applyStates(defs); err != nil { // indexstate.go
		return r.res, err
	}
	r.res.Indexes = len(r.defs)
	done, err := r.applyChanges()
	if err != nil {
		return r.res, err
	}
	r.res.More = !done
	if done {
		// The most advanced first: an index that follows the namespace
		// reads its few new messages and is covered although a sibling
		// still builds and spends the rest of the budget.
		order := make([]*fsmv1.IndexDefinition, len(r.defs))
		copy(order, r.defs)
		gps := make(map[uint64]int64, len(order))
		for _, d := range order {
			c, err := r.ckpt(d.Id)
			if err != nil {
				return r.res, err
			}
			gps[d.Id] = c.gp
		}
		sort.SliceStable(order, func(i, j int) bool { return gps[order[i].Id] > gps[order[j].Id] })
		for _, d := range order {
			if r.paused[d.Id] {
				continue // records only (indexstate.go)
			}
			end, err := r.scan(d)
			if err != nil {
				return r.res, err
			}
			if end {
				r.res.CoveredIDs = append(r.res.CoveredIDs, d.Id)
			}
			if r.spent() {
				r.res.More = true
				break
			}
		}
	}
	return r.res, nil
}

// finish writes into w, the batch the round commits, after everything
// else of the round: an index that reached the end of the snapshot is
// built, and a rebuild that is replaces its old definition at once (the
// old one's keys dropped after its last entries of the round); then
// every checkpoint the round changed.
func (r *indexRound) finish(w indexWriter) error {
	for _, id := range r.res.CoveredIDs {
		if c := r.ckpts[id]; !c.built {
			c.built = true
			r.touch(id)
			if old, ok := r.replaces[id]; ok {
				if err := dropIndexKeys(w, old); err != nil {
					return err
				}
				r.dropped = append(r.dropped, old)
				delete(r.ckpts, old)
				delete(r.dirty, old)
			}
		}
	}
	for id := range r.dirty {
		if err := w.Set(indexCkptKey(id), r.ckpts[id].encode(), nil); err != nil {
			return err
		}
	}
	return nil
}

// flushDistinct is s.flush for sets of distinct keys (the scan's entries
// and reverse keys: one per index and position): an unstable sort, much
// cheaper than flush's stable one on these runs of sorted keys.
func flushDistinct(s *sortedSets, w indexWriter) error {
	a := s.arena
	slices.SortFunc(s.kvs, func(x, y stagedKV) int { return bytes.Compare(a[x.k0:x.k1], a[y.k0:y.k1]) })
	for _, kv := range s.kvs {
		if err := w.Set(a[kv.k0:kv.k1], a[kv.k1:kv.v1], nil); err != nil {
			return err
		}
	}
	s.reset()
	return nil
}

// ckpt returns the checkpoint of index id (zero when none is stored).
func (r *indexRound) ckpt(id uint64) (*indexCkpt, error) {
	if c, ok := r.ckpts[id]; ok {
		return c, nil
	}
	c := &indexCkpt{}
	v, closer, err := r.b.Get(indexCkptKey(id))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		*c, err = decodeIndexCkpt(v)
		closer.Close()
		if err != nil {
			return nil, failIndex(id, "its checkpoint (XC) does not decode: %v", err)
		}
	}
	r.ckpts[id] = c
	return c, nil
}

// spent reports that the round reached one of its bounds: messages and
// records (budget), bytes read, or bytes staged to write in its batches
// (the indexed batch, the memory store's, and the scan's staged entries).
func (r *indexRound) spent() bool {
	if r.budget <= 0 || r.res.ReadBytes >= r.readLimit {
		return true
	}
	staged := int64(r.b.disk.Len()) + int64(len(r.sets.arena)) + int64(len(r.sets.kvs))*stagedOverhead
	if r.b.mem != nil {
		staged += int64(r.b.mem.Len())
	}
	return staged >= r.batchLimit
}

// stagedOverhead is what a staged set adds to a batch beside its key and
// value: its kind and two length varints, within this for keys and values
// under 2 MiB.
const stagedOverhead = 7

func (r *indexRound) touch(id uint64) {
	if r.dirty == nil {
		r.dirty = map[uint64]bool{}
	}
	r.dirty[id] = true
}

// applyChanges applies the change records of the snapshot in log order
// and deletes them; done is false when the budget ran out first.
func (r *indexRound) applyChanges() (done bool, err error) {
	it, err := r.snap.NewIter(&pebble.IterOptions{LowerBound: prefixIndexChange, UpperBound: prefixEnd(prefixIndexChange)})
	if err != nil {
		return false, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if r.spent() {
			return false, nil
		}
		k, v := it.Key(), it.Value()
		if len(k) != len(prefixIndexChange)+16 || len(v) != 9 {
			return false, fmt.Errorf("change record %x: %w", k, errCorruptValue)
		}
		lo := keySuffixUint64(k)
		hi := int64(binary.BigEndian.Uint64(v[1:]))
		switch v[0] {
		case changeRemoved, changeAdded:
			if v[0] == changeRemoved && indexSkipsRemoval(r.s.opts.IndexMutant, lo) {
				break // a mutant's bug (mutant_on.go); never in normal builds
			}
			// A run in chunks of positions, each applied to every index,
			// until the budget is spent: the rest stays a record of its
			// own (rewritten below: same entry, a higher lo, so still in
			// log order), and the round commits what it did with the
			// checkpoints it changed.
			for lo <= hi {
				end := min(hi, lo+indexRunChunk-1)
				if err := r.applyRun(v[0], lo, end); err != nil {
					return false, err
				}
				lo = end + 1
				if lo <= hi && r.spent() {
					if err := r.b.Delete(k, nil); err != nil {
						return false, err
					}
					if err := r.b.Set(indexChangeKey(binary.BigEndian.Uint64(k[len(prefixIndexChange):]), lo), v, nil); err != nil {
						return false, err
					}
					return false, nil
				}
			}
		case changeCleared:
			for _, d := range r.defs {
				if err := r.drop(d.Id); err != nil {
					return false, err
				}
				r.ckpts[d.Id] = &indexCkpt{}
				r.touch(d.Id)
			}
		case changeDropped:
			if err := r.drop(uint64(hi)); err != nil {
				return false, err
			}
			r.dropped = append(r.dropped, uint64(hi))
			delete(r.ckpts, uint64(hi))
			delete(r.dirty, uint64(hi))
		default:
			return false, fmt.Errorf("change record %x kind %q: %w", k, v[0], errCorruptValue)
		}
		if err := r.b.Delete(k, nil); err != nil {
			return false, err
		}
		r.res.Changes++
		r.budget--
	}
	return true, it.Error()
}

// indexRunChunk is the global positions of a removed or added run applied
// to every index before the round looks at its budget again: a run of a
// million removed messages is spread over rounds of about the budget
// each (DESIGN.md, User-defined indexes).
const indexRunChunk = 1000

// applyRun applies the positions lo..hi of an R or A record to every
// index. Applying a part twice is harmless (the entries are gone, or
// replaced by the same).
func (r *indexRound) applyRun(kind byte, lo, hi int64) error {
	if kind == changeAdded {
		return r.addRun(lo, hi)
	}
	for _, d := range r.defs {
		var err error
		if isStreamIndex(d) {
			err = r.removeStreamRun(d, lo, hi)
		} else {
			err = r.removeRun(d.Id, lo, hi)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// removeRun deletes index id's entries of global positions lo..hi.
func (r *indexRound) removeRun(id uint64, lo, hi int64) error {
	it, err := r.b.NewIter(&pebble.IterOptions{LowerBound: indexReverseKey(id, lo), UpperBound: indexReverseKey(id, hi+1)})
	if err != nil {
		return err
	}
	defer it.Close()
	c, err := r.ckpt(id)
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		gp := keySuffixUint64(it.Key())
		if err := r.deleteEntry(id, gp, it.Value()); err != nil {
			return err
		}
		c.entries--
		r.touch(id)
		r.res.Removed++
		r.budget--
	}
	return it.Error()
}

// deleteEntry deletes the entry of gp whose fields are fields, and its
// reverse key.
func (r *indexRound) deleteEntry(id uint64, gp int64, fields []byte) error {
	r.key = appendUint64(append(append(r.key[:0], indexEntryPrefix(id)...), fields...), uint64(gp))
	if err := r.b.Delete(r.key, nil); err != nil {
		return err
	}
	return r.b.Delete(indexReverseKey(id, gp), nil)
}

// drop deletes every entry, reverse key (XV, and XS of a stream index)
// and the checkpoint of index id.
func (r *indexRound) drop(id uint64) error { return dropIndexKeys(r.b, id) }

// indexWriter is what a round writes through: a Pebble batch, or the
// round's indexBatch, which routes memory indexes' keys to their store
// (indexmem.go).
type indexWriter interface {
	Set(k, v []byte, o *pebble.WriteOptions) error
	Delete(k []byte, o *pebble.WriteOptions) error
	DeleteRange(lo, hi []byte, o *pebble.WriteOptions) error
}

func dropIndexKeys(w indexWriter, id uint64) error {
	for _, p := range [][]byte{indexEntryPrefix(id), appendUint64(append([]byte(nil), prefixIndexReverse...), id), appendUint64(append([]byte(nil), prefixIndexStream...), id)} {
		if err := w.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return err
		}
	}
	if err := w.Delete(indexFailedKey(id), nil); err != nil {
		return err
	}
	return w.Delete(indexCkptKey(id), nil)
}

// addRun indexes the messages lo..hi an import wrote, for each index
// whose checkpoint is past them (the scan finds the others).
func (r *indexRound) addRun(lo, hi int64) error {
	for _, d := range r.defs {
		if isStreamIndex(d) {
			if err := r.addStreamRun(d, lo, hi); err != nil {
				return err
			}
			continue
		}
		c, err := r.ckpt(d.Id)
		if err != nil {
			return err
		}
		for gp := lo; gp <= min(hi, c.gp); gp++ {
			m, found, err := r.readMessage(gp)
			if err != nil {
				return err
			}
			if !found {
				continue // removed since: a later record says so, or it never came
			}
			// An entry may exist from an earlier round (a replayed
			// import): replace it.
			old, closer, err := r.b.Get(indexReverseKey(d.Id, gp))
			if err == nil {
				err = r.deleteEntry(d.Id, gp, bytes.Clone(old))
				closer.Close()
				c.entries--
				if err != nil {
					return err
				}
			} else if !errors.Is(err, pebble.ErrNotFound) {
				return err
			}
			if err := r.index(d, c, &m, false); err != nil {
				return err
			}
			r.touch(d.Id)
		}
	}
	return nil
}

// scan indexes the messages above d's checkpoint, within the budget; end
// reports that it read the snapshot's last message.
func (r *indexRound) scan(d *fsmv1.IndexDefinition) (end bool, err error) {
	c, err := r.ckpt(d.Id)
	if err != nil {
		return false, err
	}
	it, err := r.snap.NewIter(&pebble.IterOptions{LowerBound: messageKey(c.gp + 1), UpperBound: prefixEnd(prefixMessage)})
	if err != nil {
		return false, err
	}
	defer it.Close()
	staged := !isStreamIndex(d)
	ok := it.First()
	for ; ok && !r.spent(); ok = it.Next() {
		gp := keySuffixUint64(it.Key())
		v, err := it.ValueAndErr()
		if err != nil {
			return false, err
		}
		r.res.ReadBytes += int64(len(v))
		m, err := decodeMessage(gp, v)
		if err != nil {
			return false, err
		}
		r.res.Read++
		r.budget--
		if err := r.index(d, c, &m, staged); err != nil {
			return false, err
		}
		c.gp = gp
		r.touch(d.Id)
	}
	if err := it.Error(); err != nil || ok {
		return false, err
	}
	// The end of the snapshot: the positions past its last message up to
	// the namespace's last one hold no message (their messages were
	// deleted), so the checkpoint passes them too, and the index lags by
	// none of them. An import that writes there later stages an added
	// record (changeAdded), which indexes what is at or below the
	// checkpoint.
	last, err := r.lastPosition()
	if err != nil {
		return false, err
	}
	if last > c.gp {
		c.gp = last
		r.touch(d.Id)
	}
	return true, nil
}

// lastPosition is the snapshot's last global position given out (0 in a
// namespace that never held a message), read once per round.
func (r *indexRound) lastPosition() (int64, error) {
	if r.last == 0 {
		v, err := get(r.snap, keyNextGP)
		if err != nil {
			return 0, err
		}
		next := int64(1)
		if v != nil {
			if next, err = decodeUint64(v); err != nil {
				return 0, err
			}
		}
		r.last = next
	}
	return r.last - 1, nil
}

// index writes m's entry in d when m matches d's source and has every
// field; a missing or mistyped field skips it (counted).
// staged: the entry goes to r.sets (the scan of an event index), not b.
func (r *indexRound) index(d *fsmv1.IndexDefinition, c *indexCkpt, m *Message, staged bool) error {
	if !indexMatches(d, m) {
		return nil
	}
	fields, err := r.entryFields(d, m)
	if err != nil {
		c.skipped++
		r.res.Skipped++
		if errors.Is(err, errFieldTooLarge) {
			r.res.TooLarge++
		}
		return nil
	}
	if indexDropsEntry(r.s.opts.IndexMutant, m.GlobalPosition) {
		return nil // a mutant's bug (mutant_on.go); never in normal builds
	}
	if isStreamIndex(d) {
		return r.upsertStream(d, c, m, fields)
	}
	r.key = appendUint64(append(append(r.key[:0], indexEntryPrefix(d.Id)...), fields...), uint64(m.GlobalPosition))
	if staged {
		r.reserve(2*len(r.key) + len(fields))
		r.sets.set(r.key, nil)
		r.key = appendUint64(append(r.key[:0], prefixIndexReverse...), d.Id)
		r.sets.set(appendUint64(r.key, uint64(m.GlobalPosition)), fields)
	} else {
		if err := r.b.Set(r.key, nil, nil); err != nil {
			return err
		}
		if err := r.b.Set(indexReverseKey(d.Id, m.GlobalPosition), fields, nil); err != nil {
			return err
		}
	}
	c.entries++
	r.res.Indexed++
	return nil
}

// reserve makes room for n more bytes in the scan's staging space, at
// least doubling it when it grows: append's smaller steps for large
// slices would leave about four times the round's staged bytes behind as
// garbage, this at most as much as it stages.
func (r *indexRound) reserve(n int) {
	a := r.sets.arena
	if cap(a)-len(a) >= n {
		return
	}
	grown := make([]byte, len(a), max(2*cap(a), len(a)+n, 64<<10))
	copy(grown, a)
	r.sets.arena = grown
}

// entryFields is the concatenated order keys of m's fields in d; the
// error says why m has none (a field missing, of another type, or too
// large: fieldValue). The bytes are the round's buffer: valid until the
// next call.
func (r *indexRound) entryFields(d *fsmv1.IndexDefinition, m *Message) ([]byte, error) {
	out := r.fields[:0]
	for _, f := range d.Fields {
		v, err := fieldValue(f, m, r.pointerTokens(f))
		if err != nil {
			return nil, err
		}
		out = appendOrderKey(out, f.Type, v)
	}
	r.fields = out
	return out, nil
}

// pointerTokens are f's pointer tokens, split once per round.
func (r *indexRound) pointerTokens(f *fsmv1.IndexField) []string {
	if f.Pointer == "" {
		return nil
	}
	toks, ok := r.toks[f]
	if !ok {
		if r.toks == nil {
			r.toks = map[*fsmv1.IndexField][]string{}
		}
		toks = jsonscan.PointerTokens(f.Pointer)
		r.toks[f] = toks
	}
	return toks
}

// IndexCovered returns the applied index up to which namespace name's
// indexes hold every message on this node (0 when no round finished
// since the store opened).
func (s *Store) IndexCovered(name string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ns, ok := s.mu.namespaces[name]; ok {
		return ns.indexer.covered.Load()
	}
	return 0
}

// WaitIndexed blocks until namespace name's index of that name (every
// index of the namespace when it is "") holds every message of the
// entries up to index, or ctx ends (its error is returned). A name the
// namespace has no index of returns at once: the read reports it.
func (s *Store) WaitIndexed(ctx context.Context, name, indexName string, index uint64) error {
	for {
		ch := s.indexWake.wait()
		s.mu.Lock()
		ns, ok := s.mu.namespaces[name]
		s.mu.Unlock()
		if !ok {
			return ErrNamespaceNotFound
		}
		if indexName == "" && ns.indexer.covered.Load() >= index {
			return nil
		}
		if indexName != "" {
			id, found, err := s.liveIndexID(name, indexName)
			if err != nil || !found {
				return err
			}
			if ns.indexer.coverage()[id] >= index {
				return nil
			}
			if err := s.indexBlocked(name, indexName, id); err != nil {
				return err // paused or failed: it would wait in vain
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// liveIndexID is the id of namespace name's index indexName in its live
// database (found is false when it has none).
func (s *Store) liveIndexID(name, indexName string) (id uint64, found bool, err error) {
	ns, err := s.acquire(name)
	if err != nil {
		return 0, false, err
	}
	defer s.release(ns)
	v, err := get(ns.db, indexDefKey(indexName))
	if err != nil || v == nil {
		return 0, false, err
	}
	d := &fsmv1.IndexDefinition{}
	if err := proto.Unmarshal(v, d); err != nil {
		return 0, false, fmt.Errorf("fsm: index %q: %w", indexName, err)
	}
	answer, _, err := effectiveIndex(liveIndexReader{ns}, d)
	if err != nil {
		return 0, false, err
	}
	return answer.Id, true, nil
}

// IndexCoveredBy returns the applied index up to which namespace name's
// index indexName holds every message on this node (0: not known yet, or
// no such index).
func (s *Store) IndexCoveredBy(name, indexName string) uint64 {
	s.mu.Lock()
	ns, ok := s.mu.namespaces[name]
	s.mu.Unlock()
	if !ok {
		return 0
	}
	id, found, err := s.liveIndexID(name, indexName)
	if err != nil || !found {
		return 0
	}
	return ns.indexer.coverage()[id]
}
