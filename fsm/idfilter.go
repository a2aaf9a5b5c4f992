package fsm

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// idFilter is an in-memory Bloom filter, per bucket, of the ids a
// namespace database remembers (dedupe.go). Almost every id an append
// brings is new, and proving that with Pebble point reads cost about
// 7 µs per read under load (filter and index blocks of fresh tables);
// the filter answers "certainly absent" for most of them from memory.
//
// It is only an accelerator and never decides anything: "maybe present"
// is confirmed in the database, and it has no false negatives (it holds
// every id of the database's buckets at or above the floor it was loaded
// with, plus every id committed since), so apply's answers do not depend
// on it and may use a per-process random hash seed.
//
// Each bucket holds segments of doubling capacity (blocked Bloom filters,
// one 64-byte block per id, 7 bits, 12 bits per id): memory is
// about 1.5 bytes per remembered id, a lookup reads one cache line per
// segment.
type idFilter struct {
	seed    maphash.Seed
	buckets map[int64][]*bloomSeg
}

type bloomSeg struct {
	blocks [][8]uint64
	n, cap int
}

const firstSegCap = 4096

func newIDFilter() *idFilter {
	return &idFilter{seed: maphash.MakeSeed(), buckets: make(map[int64][]*bloomSeg)}
}

// idFilterLoad is a filter being read from the database in the
// background. Reading every remembered id of a large namespace takes
// seconds (3.5 million ids: 2-7 s on a loaded node), and apply used to do
// it at the first append after the database opened, so after a restart
// every write, and the followers' Raft loops behind their state machines,
// waited it out (bench/README.md, Tail latency at scale). Now apply asks
// the database itself while the load runs (what the filter only speeds
// up) and adopts the filter once it is read.
//
// The load reads through an iterator taken when it starts, on the
// goroutine that holds Store.applyMu, so it sees every id committed
// before; apply records every id it commits after in pending, and adopt
// adds them: the adopted filter has no false negatives.
type idFilterLoad struct {
	stop atomic.Bool
	done chan struct{} // closed when f and err are set and the iterator is closed
	f    *idFilter
	err  error
	// pending are the ids committed since the load started; only the
	// holder of Store.applyMu touches it.
	pending []pendingID
}

type pendingID struct {
	bucket int64
	id     string
}

// errIDFilterLoadStopped ends a load that was cancelled.
var errIDFilterLoadStopped = errors.New("fsm: id filter load cancelled")

// startIDFilterLoad starts reading every id of buckets floor and above
// from db. before, when set, runs on the loading goroutine first (tests
// hold a load there). Call with Store.applyMu held; cancel or adopt it
// before db closes.
func startIDFilterLoad(db *pebble.DB, floor int64, before func()) (*idFilterLoad, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: dedupeBucketKey(floor), UpperBound: prefixEnd(prefixDedupe)})
	if err != nil {
		return nil, err
	}
	l := &idFilterLoad{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		if before != nil {
			before()
		}
		l.f, l.err = l.read(it)
	}()
	return l, nil
}

// read adds every id it iterates to a new filter and closes it.
func (l *idFilterLoad) read(it *pebble.Iterator) (*idFilter, error) {
	f := newIDFilter()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if n++; n%4096 == 0 && l.stop.Load() {
			it.Close()
			return nil, errIDFilterLoadStopped
		}
		k := it.Key()
		if len(k) < len(prefixDedupe)+8 {
			it.Close()
			return nil, fmt.Errorf("id index key %x: %w", k, errCorruptValue)
		}
		f.add(keySuffixUint64(k[:len(prefixDedupe)+8]), string(k[len(prefixDedupe)+8:]))
	}
	return f, it.Close()
}

// committed records ids apply committed while the load runs.
func (l *idFilterLoad) committed(bucket int64, id string) {
	l.pending = append(l.pending, pendingID{bucket, id})
}

// adopt returns the loaded filter with the pending ids added (ok false
// while the load runs). A failed load returns its error.
func (l *idFilterLoad) adopt() (f *idFilter, ok bool, err error) {
	select {
	case <-l.done:
	default:
		return nil, false, nil
	}
	if l.err != nil {
		return nil, true, l.err
	}
	for _, p := range l.pending {
		l.f.add(p.bucket, p.id)
	}
	l.pending = nil
	return l.f, true, nil
}

// cancel stops the load and waits until its iterator is closed.
func (l *idFilterLoad) cancel() {
	l.stop.Store(true)
	<-l.done
}

func (f *idFilter) hash(id string) (block uint64, bitsOf uint64) {
	h := maphash.String(f.seed, id)
	return h, bits.RotateLeft64(h, 29) * 0x9e3779b97f4a7c15
}

func (f *idFilter) add(bucket int64, id string) {
	segs := f.buckets[bucket]
	if len(segs) == 0 || segs[len(segs)-1].n >= segs[len(segs)-1].cap {
		c := firstSegCap
		if len(segs) > 0 {
			c = segs[len(segs)-1].cap * 2
		}
		// 12 bits per id, in 512-bit blocks.
		segs = append(segs, &bloomSeg{blocks: make([][8]uint64, max(1, c*12/512)), cap: c})
		f.buckets[bucket] = segs
	}
	s := segs[len(segs)-1]
	h1, h2 := f.hash(id)
	b := &s.blocks[h1%uint64(len(s.blocks))]
	for i := range 7 {
		bit := (h2 >> (9 * i)) & 511
		b[bit/64] |= 1 << (bit % 64)
	}
	s.n++
}

// mayContain reports false when bucket certainly does not hold id.
func (f *idFilter) mayContain(bucket int64, id string) bool {
	segs := f.buckets[bucket]
	if len(segs) == 0 {
		return false
	}
	h1, h2 := f.hash(id)
	for _, s := range segs {
		b := &s.blocks[h1%uint64(len(s.blocks))]
		hit := true
		for i := range 7 {
			bit := (h2 >> (9 * i)) & 511
			if b[bit/64]&(1<<(bit%64)) == 0 {
				hit = false
				break
			}
		}
		if hit {
			return true
		}
	}
	return false
}

// expire drops the buckets below floor.
func (f *idFilter) expire(floor int64) {
	for b := range f.buckets {
		if b < floor {
			delete(f.buckets, b)
		}
	}
}
