package fsm

import (
	"bytes"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"
)

// sortedSets stages the point writes of one namespace batch and hands them
// to Pebble in key order.
//
// Pebble inserts a batch into the memtable skiplist in batch order, and its
// inserter reuses the previous insert's position when the next key lies
// close after it. A replicated write touches several key families (M, SI,
// TI, CI, VI, ...), so in entry order every insert is a fresh search from
// the top of a skiplist of about a million entries. In key order the M and
// CI keys of a batch are runs of neighbours, and the searches of the other
// families share their upper levels.
//
// INVARIANT: keys staged between two flushes are distinct (each message has
// its own global position and stream position; VI, CC, NI, GP and A are
// staged once per commit), so their order inside the batch carries no
// meaning. Range deletions, and writes that must be ordered against them,
// do not go through here: clear stages its DeleteRange right after a
// commit, before any set; the id index (dedupe.go) writes its keys and
// expires its buckets in the batch directly, in entry order.
type sortedSets struct {
	arena []byte
	kvs   []stagedKV
}

type stagedKV struct{ k0, k1, v1 int } // arena[k0:k1] key, arena[k1:v1] value

// set stages k = v; both are copied, so the caller may reuse them.
func (s *sortedSets) set(k, v []byte) {
	k0 := len(s.arena)
	s.arena = append(s.arena, k...)
	k1 := len(s.arena)
	s.arena = append(s.arena, v...)
	s.kvs = append(s.kvs, stagedKV{k0, k1, len(s.arena)})
}

// setMessage stages k = m as opts encodes it, encoding m in the arena
// itself rather than in a buffer set would copy from: a message's data is
// its largest part. On an error nothing is staged.
func (s *sortedSets) setMessage(k []byte, opts proto.MarshalOptions, m proto.Message) error {
	k0 := len(s.arena)
	s.arena = append(s.arena, k...)
	k1 := len(s.arena)
	a, err := opts.MarshalAppend(s.arena, m)
	if err != nil {
		s.arena = s.arena[:k0]
		return err
	}
	s.arena = a
	s.kvs = append(s.kvs, stagedKV{k0, k1, len(s.arena)})
	return nil
}

// flush writes the staged sets into b in key order and empties s.
func (s *sortedSets) flush(b *pebble.Batch) error {
	a := s.arena
	slices.SortStableFunc(s.kvs, func(x, y stagedKV) int {
		return bytes.Compare(a[x.k0:x.k1], a[y.k0:y.k1])
	})
	for _, kv := range s.kvs {
		if err := b.Set(a[kv.k0:kv.k1], a[kv.k1:kv.v1], nil); err != nil {
			return err
		}
	}
	s.reset()
	return nil
}

// maxKeptArena bounds the staging space kept between batches: a large
// import chunk must not pin its size for the life of the namespace.
const maxKeptArena = 1 << 20

func (s *sortedSets) reset() {
	if cap(s.arena) > maxKeptArena {
		s.arena, s.kvs = nil, nil
	}
	s.arena, s.kvs = s.arena[:0], s.kvs[:0]
}
