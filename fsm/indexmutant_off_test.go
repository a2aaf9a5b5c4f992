//go:build !mutants

package fsm

import (
	"fmt"
	"reflect"
	"testing"
)

// TestIndexMutantIgnored: outside mutants builds Options.IndexMutant
// changes nothing: the index still equals the model.
func TestIndexMutantIgnored(t *testing.T) {
	for _, mutant := range []byte{1, 2} {
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
		want, _ := modelEntries(t, s, "ns")
		if got := indexEntries(t, s, "ns", "bal"); !reflect.DeepEqual(got, want) {
			t.Fatalf("IndexMutant %d: index holds %d entries, model %d", mutant, len(got), len(want))
		}
	}
}
