package fsm

import (
	"fmt"
	"hash/maphash"
	"math/bits"

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

// loadIDFilter reads every id of buckets floor and above.
func loadIDFilter(db *pebble.DB, floor int64) (*idFilter, error) {
	f := newIDFilter()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: dedupeBucketKey(floor), UpperBound: prefixEnd(prefixDedupe)})
	if err != nil {
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < len(prefixDedupe)+8 {
			it.Close()
			return nil, fmt.Errorf("id index key %x: %w", k, errCorruptValue)
		}
		f.add(keySuffixUint64(k[:len(prefixDedupe)+8]), string(k[len(prefixDedupe)+8:]))
	}
	return f, it.Close()
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
