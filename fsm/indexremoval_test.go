package fsm

import (
	"reflect"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// A removed run far longer than a round's budget is applied over several
// rounds, a chunk of positions at a time: each round commits its part of
// the entries with checkpoints that count exactly the entries left, and
// when the rounds end both indexes equal their models.
func TestIndexRemovalInBoundedRounds(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", balanceIndex()))
	f.must(createIndexCmd("ns", lastIndex()))
	const total = 3500
	for i := 0; i < total; i += 500 {
		msgs := make([]*fsmv1.NewMessage, 500)
		for j := range msgs {
			msgs[j] = accountMsg(i+j, "o")
		}
		f.must(appendCmd("ns", "account-1", msgs...))
	}
	f.must(appendCmd("ns", "account-2", accountMsg(-1, "p"), accountMsg(-2, "p")))
	catchUp(t, s, "ns")
	// One run of the stream's positions 0..total-10: its last nine
	// messages stay, its entry in "last" too.
	f.must(truncateCmd("ns", "account-1", total-9))

	checkExact := func(round int) {
		t.Helper()
		for _, name := range []string{"bal", "last"} {
			info, err := view(t, s, "ns").Index(name)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if name == "bal" {
				n = len(indexEntries(t, s, "ns", name))
			} else {
				e, _ := streamIndexEntries(t, s, "ns", name)
				n = len(e)
			}
			if info.Entries != int64(n) {
				t.Fatalf("after round %d index %q's checkpoint counts %d entries; it holds %d", round, name, info.Entries, n)
			}
		}
	}
	var removed []int64
	for round := 1; ; round++ {
		r, err := s.IndexRound("ns", 100)
		if err != nil {
			t.Fatal(err)
		}
		removed = append(removed, r.Removed)
		checkExact(round)
		if !r.More {
			break
		}
		if round > 100 {
			t.Fatal("index rounds never end")
		}
	}
	// Chunks of indexRunChunk positions, one per round (the budget of 100
	// is spent by the first), then the rest, then a round that finds
	// nothing more (the last one spent its budget).
	want := []int64{indexRunChunk, indexRunChunk, indexRunChunk, total - 9 - 3*indexRunChunk, 0}
	if !reflect.DeepEqual(removed, want) {
		t.Fatalf("rounds removed %v entries, want %v", removed, want)
	}
	wantBal, _ := modelEntries(t, s, "ns")
	if got := indexEntries(t, s, "ns", "bal"); !reflect.DeepEqual(got, wantBal) {
		t.Fatalf("event index holds %d entries %v, model %d %v", len(got), keysOf(got), len(wantBal), keysOf(wantBal))
	}
	wantLast, wantStreams := modelStreamEntries(t, s, "ns")
	gotLast, gotStreams := streamIndexEntries(t, s, "ns", "last")
	if !reflect.DeepEqual(gotLast, wantLast) || !reflect.DeepEqual(gotStreams, wantStreams) {
		t.Fatalf("stream index holds %v %v, model %v %v", gotLast, gotStreams, wantLast, wantStreams)
	}
	if n := len(wantBal); n != 11 {
		t.Fatalf("model holds %d entries, want 11 (9 of account-1, 2 of account-2)", n)
	}
}
