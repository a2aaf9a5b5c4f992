package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

func memoryIndex(d *fsmv1.IndexDefinition) *fsmv1.IndexDefinition {
	d.Storage = fsmv1.IndexStorage_INDEX_STORAGE_MEMORY
	return d
}

// A restart builds a memory index again from the messages (a Pebble one
// resumes from its checkpoint), and it answers the same query as before.
func TestIndexMemoryRebuiltAtStart(t *testing.T) {
	fs := vfs.NewMem()
	s := openTestStore(t, fs)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	mem := memoryIndex(balanceIndex())
	mem.Name = "mem"
	f.must(createIndexCmd("ns", mem))
	f.must(createIndexCmd("ns", balanceIndex()))
	for i := range 300 {
		f.must(appendCmd("ns", fmt.Sprintf("account-%d", i%10), accountMsg(i%50, fmt.Sprintf("o%d", i%7))))
	}
	catchUp(t, s, "ns")
	q := IndexQuery{Index: "mem", Equal: []string{"7"}, PositionsOnly: true}
	v, err := s.View("ns") // closed before the store is
	if err != nil {
		t.Fatal(err)
	}
	page, err := v.QueryIndex(q)
	v.Close()
	if err != nil {
		t.Fatal(err)
	}
	var before []int64
	for _, h := range page.Hits {
		before = append(before, h.GlobalPosition)
	}
	if len(before) != 6 {
		t.Fatalf("query before the restart: %v, want 6 hits", before)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	next := f.next
	s = openTestStore(t, fs)
	f = &feeder{t: t, s: s, next: next}
	if info, err := view(t, s, "ns").Index("mem"); err != nil || info.Built || info.Entries != 0 {
		t.Fatalf("memory index before the first round after the restart: %+v, %v (want empty, building)", info, err)
	}
	catchUp(t, s, "ns")
	if c := s.IndexCounters(); c.Read != 300 || c.Indexed != 300 {
		t.Fatalf("after the restart the loops read %d and indexed %d; want 300 (the memory index again, the Pebble one nothing)", c.Read, c.Indexed)
	}
	after, _ := queryHits(t, s, q)
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("query after the restart: %v, want %v", after, before)
	}
	info, err := view(t, s, "ns").Index("mem")
	if err != nil || !info.Built || info.Entries != 300 || info.MemoryBytes <= 0 {
		t.Fatalf("memory index after the restart: %+v, %v", info, err)
	}
	if d, _ := view(t, s, "ns").Index("bal"); d.MemoryBytes != 0 {
		t.Fatalf("the Pebble index reports %d bytes of memory", d.MemoryBytes)
	}
}

// Past Options.IndexMemoryLimit a memory index fails on the node with a
// reason naming the limit, its keys are dropped, and a Pebble sibling
// goes on.
func TestIndexMemoryLimit(t *testing.T) {
	const limit = 1 << 20
	s := openTestStore(t, nil, func(o *Options) { o.IndexMemoryLimit = limit })
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	mem := memoryIndex(balanceIndex())
	mem.Name = "mem"
	f.must(createIndexCmd("ns", mem))
	f.must(createIndexCmd("ns", balanceIndex()))
	owner := strings.Repeat("x", 200) // about 450 bytes of keys per entry
	for i := range 40 {
		var msgs []*fsmv1.NewMessage
		for j := range 100 {
			msgs = append(msgs, accountMsg(i*100+j, owner))
		}
		f.must(appendCmd("ns", fmt.Sprintf("account-%d", i), msgs...))
	}
	res := catchUp(t, s, "ns")
	info, err := view(t, s, "ns").Index("mem")
	if err != nil || !strings.Contains(info.Failure, fmt.Sprintf("more than the limit of %d", limit)) {
		t.Fatalf("memory index past the limit: %+v, %v; want failed naming the limit", info, err)
	}
	if len(res.Failed) != 1 || res.Failed[0].Index != "mem" || res.Failed[0].Reason != info.Failure {
		t.Fatalf("the rounds report failures %+v; want %q with its reason", res.Failed, "mem")
	}
	if _, err := view(t, s, "ns").QueryIndex(IndexQuery{Index: "mem", PositionsOnly: true}); !errors.Is(err, ErrIndexFailed) {
		t.Fatalf("query of the failed memory index: %v", err)
	}
	want, _ := modelEntries(t, s, "ns")
	if got := indexEntries(t, s, "ns", "bal"); len(got) != 4000 || !equalMaps(got, want) {
		t.Fatalf("the Pebble sibling holds %d entries, want 4000", len(got))
	}
	// Its keys were dropped: the memory store holds nothing of it.
	h, err := s.acquire("ns")
	if err != nil {
		t.Fatal(err)
	}
	defer s.release(h)
	it, err := h.memIdx.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	it.Close()
	if n != 0 {
		t.Fatalf("the failed memory index keeps %d keys in memory", n)
	}
	// ... and their memory given back, but for the memtable's arena.
	var atFailure int64
	if _, err := fmt.Sscanf(info.Failure[strings.Index(info.Failure, "hold "):], "hold %d bytes", &atFailure); err != nil {
		t.Fatalf("failure %q: %v", info.Failure, err)
	}
	if b := h.memIdx.bytes.Load(); b >= atFailure {
		t.Fatalf("the memory store holds %d bytes after the failed index was dropped, %d at the failure", b, atFailure)
	}
}

// appendDocs appends n messages of category doc whose /v is a distinct
// string of valueBytes hex digits that do not compress, 100 a call.
func appendDocs(t *testing.T, f *feeder, from, n, valueBytes int) {
	t.Helper()
	for i := from; i < from+n; i += 100 {
		var msgs []*fsmv1.NewMessage
		for j := i; j < min(from+n, i+100); j++ {
			var v []byte
			for sum := sha256.Sum256(fmt.Append(nil, j)); len(v) < valueBytes; sum = sha256.Sum256(sum[:]) {
				v = hex.AppendEncode(v, sum[:])
			}
			msgs = append(msgs, newMsg("Doc", `{"v":"`+string(v[:valueBytes])+`"}`))
		}
		f.must(appendCmd("ns", fmt.Sprintf("doc-%d", i), msgs...))
	}
}

// A memory index fails near its limit, however much one round would
// write: a round writes at most a sixteenth of the limit to the memory
// store, and a round that would take the store past the limit fails the
// indexes it wrote before committing, so the store never holds more than
// the limit (but for the memtable's overhead per key).
func TestIndexMemoryFailsNearLimit(t *testing.T) {
	const limit = 4 << 20
	s := openTestStore(t, nil, func(o *Options) { o.IndexMemoryLimit = limit })
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", memoryIndex(docIndex("mem", fsmv1.IndexKind_INDEX_KIND_UNSPECIFIED))))
	appendDocs(t, f, 0, 10_000, MaxIndexValueBytes) // about 20 MB of entries
	h, err := s.acquire("ns")
	if err != nil {
		t.Fatal(err)
	}
	defer s.release(h)
	const slack = 256 << 10 // the memtable's nodes and the batches' headers
	var largest int64
	roundsToEnd(t, s, "ns", func(IndexRoundResult) { largest = max(largest, h.memIdx.size()) })
	info, err := view(t, s, "ns").Index("mem")
	if err != nil {
		t.Fatal(err)
	}
	var atFailure int64
	if i := strings.Index(info.Failure, "hold "); i < 0 {
		t.Fatalf("memory index past the limit: failure %q, want one naming the size", info.Failure)
	} else if _, err := fmt.Sscanf(info.Failure[i:], "hold %d bytes", &atFailure); err != nil {
		t.Fatalf("failure %q: %v", info.Failure, err)
	}
	t.Logf("limit %d: failed at %d bytes; the store held at most %d", limit, atFailure, largest)
	if atFailure > limit+limit/memBatchShare+slack || largest > limit+slack {
		t.Fatalf("the memory index failed at %d bytes and its store held up to %d; limit %d", atFailure, largest, limit)
	}
}

// Dropping a memory index's keys (its delete, or the switch to its
// rebuild) gives their memory back at once, or once a reader's view that
// was open across the drop closes; a deleted index is no longer routed to
// the store, and a sibling memory index keeps its entries.
func TestIndexMemoryDeleteFrees(t *testing.T) {
	small := memoryIndex(&fsmv1.IndexDefinition{Name: "big", Version: 2, Category: "doc",
		Fields: []*fsmv1.IndexField{{Source: fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_TYPE, Type: tString}}})
	for _, tc := range []struct {
		name    string
		drop    *fsmv1.Command
		deleted bool // else rebuilt: "big" answers from small
	}{
		{name: "delete", drop: deleteIndexCmd("ns", "big"), deleted: true},
		{name: "rebuild", drop: rebuildIndexCmd("ns", "big", small)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, nil)
			f := newFeeder(t, s)
			f.must(createNS("ns"))
			f.must(createIndexCmd("ns", memoryIndex(docIndex("big", fsmv1.IndexKind_INDEX_KIND_UNSPECIFIED))))
			keep := proto.Clone(small).(*fsmv1.IndexDefinition)
			keep.Name, keep.Version = "keep", 1
			f.must(createIndexCmd("ns", keep))
			appendDocs(t, f, 0, 10_000, MaxIndexValueBytes)
			roundsToEnd(t, s, "ns", nil)
			h, err := s.acquire("ns")
			if err != nil {
				t.Fatal(err)
			}
			defer s.release(h)
			reader, err := s.View("ns") // open across the drop: it keeps what it sees
			if err != nil {
				t.Fatal(err)
			}
			d, err := reader.indexDef("big")
			if err != nil {
				t.Fatal(err)
			}
			before := h.memIdx.size()
			f.must(tc.drop)
			roundsToEnd(t, s, "ns", nil)
			whileRead := h.memIdx.size()
			reader.Close()
			roundsToEnd(t, s, "ns", nil)
			// What may remain: a memtable's arena (4 MiB), the block
			// cache (1 MiB) and the small indexes' keys (about 40 bytes
			// an entry). Pebble deletes the compacted tables in the
			// background: wait for it.
			const bound = 7 << 20
			after := h.memIdx.size()
			for deadline := time.Now().Add(10 * time.Second); after > bound && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				after = h.memIdx.size()
			}
			t.Logf("the memory store held %d bytes with the index, %d after the drop while a reader was open, %d after",
				before, whileRead, after)
			if before < 16<<20 || after > bound {
				t.Fatalf("the memory store held %d bytes before the drop and %d 10 s after; want at most %d",
					before, after, bound)
			}
			if ids := h.memIdx.ids.Load(); tc.deleted && (ids == nil || (*ids)[d.Id] || len(*ids) != 1) {
				t.Fatalf("the store routes %v after the delete of %d; want only the sibling", ids, d.Id)
			}
			names := []string{"keep"}
			if !tc.deleted {
				names = append(names, "big")
			}
			for _, name := range names {
				q := IndexQuery{Index: name, Equal: []string{"Doc"}, PositionsOnly: true, Limit: 1000}
				if _, page := queryHits(t, s, q); len(page.Hits) != 1000 {
					t.Fatalf("index %s answers %d hits, want 1000 (a full page)", name, len(page.Hits))
				}
			}
		})
	}
}
