package node

import (
	"reflect"
	"testing"
)

// TestHooksOnlyWithMutants: a node's hooks are all nil unless the binary
// was built with -tags mutants and Config.Mutant names one; then exactly
// the hooks that mutant needs are set.
func TestHooksOnlyWithMutants(t *testing.T) {
	t.Parallel()
	set := func(h hooks) []string {
		var out []string
		v := reflect.ValueOf(h)
		for i := 0; i < v.NumField(); i++ {
			if !v.Field(i).IsNil() {
				out = append(out, v.Type().Field(i).Name)
			}
		}
		return out
	}
	cases := []struct {
		mutant string
		want   []string // with -tags mutants
	}{
		{"", nil},
		{MutantCASOutsideFSM, []string{"propose"}},
		{MutantAckBeforeCommit, []string{"proposed"}},
		{MutantStaleLinearizable, []string{"skipReadBarrier"}},
		{MutantRYWNoWait, []string{"skipReadBarrier"}},
		{MutantForwardRetry, []string{"forward"}},
		{MutantGlobalPosAtPropose, []string{"propose"}},
		{MutantDedupeAtPropose, []string{"propose"}},
		{MutantCheckpointAhead, []string{"groupCheckpoint"}},
		{MutantConditionAtPropose, []string{"propose"}},
		{MutantExpireOneTooMany, []string{"propose"}},
		{MutantExpireAgeEarly, []string{"propose"}},
		// The index loop's mutants set no hook: the store's IndexMutant
		// (TestIndexMutantOnlyWithMutants).
		{MutantIndexDropEntry, nil},
		{MutantIndexSkipRemoval, nil},
	}
	if len(cases) != len(Mutants)+1 {
		t.Fatalf("%d cases for %d mutants: add the new mutant here", len(cases)-1, len(Mutants))
	}
	for _, tc := range cases {
		n := &Node{cfg: Config{Mutant: tc.mutant}}
		n.installMutant()
		got := set(n.hooks)
		want := tc.want
		if !MutantsBuilt {
			want = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("mutant %q (built: %v): hooks set %v, want %v", tc.mutant, MutantsBuilt, got, want)
		}
	}
}

// TestIndexMutantOnlyWithMutants: the store's index loop mutant is zero
// for every name unless the binary was built with -tags mutants, and then
// non-zero, and distinct, only for the index loop's mutants.
func TestIndexMutantOnlyWithMutants(t *testing.T) {
	t.Parallel()
	seen := map[byte]string{}
	for _, name := range append([]string{""}, Mutants...) {
		got := indexMutant(name)
		want := MutantsBuilt && (name == MutantIndexDropEntry || name == MutantIndexSkipRemoval)
		if (got != 0) != want {
			t.Errorf("indexMutant(%q) = %d (built: %v), want non-zero %v", name, got, MutantsBuilt, want)
		}
		if prev, ok := seen[got]; ok && got != 0 {
			t.Errorf("indexMutant(%q) = indexMutant(%q) = %d", name, prev, got)
		}
		seen[got] = name
	}
}
