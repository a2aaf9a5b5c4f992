package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

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
	catchUp(t, s, "ns")
	info, err := view(t, s, "ns").Index("mem")
	if err != nil || !strings.Contains(info.Failure, fmt.Sprintf("more than the limit of %d", limit)) {
		t.Fatalf("memory index past the limit: %+v, %v; want failed naming the limit", info, err)
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
