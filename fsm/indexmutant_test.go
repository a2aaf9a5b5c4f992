//go:build mutants

package fsm

import (
	"fmt"
	"testing"
)

// indexWithMutant builds index bal over 120 account messages in 4
// streams, truncates one stream after the loop indexed it, and returns the
// index's entries and the model's (modelEntries).
func indexWithMutant(t *testing.T, mutant byte) (got, want map[int64]string) {
	t.Helper()
	s := openTestStore(t, nil, func(o *Options) { o.IndexMutant = mutant })
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", balanceIndex()))
	for i := range 120 {
		f.must(appendCmd("ns", fmt.Sprintf("account-%d", i%4), accountMsg(i, "o")))
	}
	catchUp(t, s, "ns")
	f.must(truncateCmd("ns", "account-1", 20))
	catchUp(t, s, "ns")
	want, _ = modelEntries(t, s, "ns")
	return indexEntries(t, s, "ns", "bal"), want
}

// TestIndexMutants: in a mutants build, Options.IndexMutant makes the
// index loop go wrong exactly as the jepsen mutants claim (and the store
// is exact without it).
func TestIndexMutants(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		got, want := indexWithMutant(t, 0)
		if len(got) != len(want) {
			t.Fatalf("index holds %d entries, model %d", len(got), len(want))
		}
	})
	t.Run("index-drop-entry", func(t *testing.T) {
		got, want := indexWithMutant(t, IndexDropEntry)
		dropped := 0
		for gp := range want {
			_, ok := got[gp]
			if ok == (gp%indexDropEvery == 0) {
				t.Fatalf("global %d: indexed %v", gp, ok)
			}
			if !ok {
				dropped++
			}
		}
		if dropped == 0 || len(got) != len(want)-dropped {
			t.Fatalf("%d dropped; index holds %d entries, model %d", dropped, len(got), len(want))
		}
	})
	t.Run("index-skip-removal", func(t *testing.T) {
		got, want := indexWithMutant(t, IndexSkipRemoval)
		for gp := range want {
			if _, ok := got[gp]; !ok {
				t.Fatalf("global %d of the model is not indexed", gp)
			}
		}
		if len(got) <= len(want) {
			t.Fatalf("index holds %d entries, model %d: no removal was skipped", len(got), len(want))
		}
	})
}
