package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// batchSets lists a batch's point writes in batch order as "key=value".
func batchSets(t *testing.T, b *pebble.Batch) []string {
	t.Helper()
	var out []string
	r := b.Reader()
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		if kind != pebble.InternalKeyKindSet {
			t.Fatalf("kind %v, want SET", kind)
		}
		out = append(out, string(k)+"="+string(v))
	}
}

func TestSortedSetsFlushInKeyOrder(t *testing.T) {
	cases := []struct {
		name string
		sets []string // key=value, in staging order
		want []string
	}{
		{"empty", nil, nil},
		{"one", []string{"A=1"}, []string{"A=1"}},
		{"families interleaved as apply stages them",
			[]string{"M\x00\x02=m2", "S\x00s-1=2", "C\x00c\x02=x", "M\x00\x01=m1", "S\x00s-0=1", "C\x00c\x01=y", "A=9"},
			[]string{"A=9", "C\x00c\x01=y", "C\x00c\x02=x", "M\x00\x01=m1", "M\x00\x02=m2", "S\x00s-0=1", "S\x00s-1=2"}},
		{"prefix sorts before its extension", []string{"ab=2", "a=1", "=0"}, []string{"=0", "a=1", "ab=2"}},
		{"empty values kept", []string{"b=", "a="}, []string{"a=", "b="}},
	}
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s sortedSets
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := db.NewBatch()
			defer b.Close()
			for _, kv := range tc.sets {
				k, v, _ := strings.Cut(kv, "=")
				s.set([]byte(k), []byte(v))
			}
			if err := s.flush(b); err != nil {
				t.Fatal(err)
			}
			if got := batchSets(t, b); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("batch holds %q, want %q", got, tc.want)
			}
			if len(s.kvs) != 0 || len(s.arena) != 0 {
				t.Fatalf("flush left %d staged writes, %d arena bytes", len(s.kvs), len(s.arena))
			}
		})
	}
}

func TestSortedSetsResetDropsLargeArena(t *testing.T) {
	var s sortedSets
	s.set([]byte("k"), make([]byte, 64))
	s.reset()
	if cap(s.arena) == 0 {
		t.Fatal("a small arena was dropped; it should be kept for the next batch")
	}
	s.set([]byte("k"), make([]byte, maxKeptArena+1))
	s.reset()
	if cap(s.arena) != 0 {
		t.Fatalf("an arena of %d bytes was kept; the bound is %d", cap(s.arena), maxKeptArena)
	}
}

// TestSortedSetsSetMessage: a message encoded in the arena is staged as
// set stages its encoding, among other sets; a message that fails to
// encode stages nothing and leaves the arena as it was.
func TestSortedSetsSetMessage(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	opts := proto.MarshalOptions{Deterministic: true}
	m := &fsmv1.StoredMessage{Id: "id", Stream: "s-1", Type: "T", Data: []byte(`{"a":1}`), Tags: []string{"x"}}
	enc, err := opts.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var s sortedSets
	s.set([]byte("b"), []byte("2"))
	if err := s.setMessage([]byte("a"), opts, m); err != nil {
		t.Fatal(err)
	}
	arena := len(s.arena)
	bad := &fsmv1.StoredMessage{Stream: "\xff"} // a string field that is not UTF-8 does not encode
	if err := s.setMessage([]byte("c"), opts, bad); err == nil {
		t.Fatal("a message with a non-UTF-8 string encoded")
	}
	if len(s.arena) != arena || len(s.kvs) != 2 {
		t.Fatalf("a failed encoding left %d arena bytes (want %d) and %d staged writes (want 2)", len(s.arena), arena, len(s.kvs))
	}
	b := db.NewBatch()
	defer b.Close()
	if err := s.flush(b); err != nil {
		t.Fatal(err)
	}
	if got, want := batchSets(t, b), []string{"a=" + string(enc), "b=2"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batch holds %q, want %q", got, want)
	}
}
