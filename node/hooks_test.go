package node

import (
	"reflect"
	"testing"
)

// TestHooksOnlyWithMutants: a node's hooks are all nil unless the binary
// was built with -tags mutants and Config.Mutant names one; then exactly
// the hooks that mutant needs are set.
func TestHooksOnlyWithMutants(t *testing.T) {
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
