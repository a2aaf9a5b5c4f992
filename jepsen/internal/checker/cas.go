package checker

import "github.com/skalddb/skald/jepsen/internal/history"

// checkCAS: for one stream and expected version at most one append
// succeeds, and it starts right after that version.
func checkCAS(s *state) bool {
	type key struct {
		stream string
		exp    int64
	}
	winners := map[key]history.Pair{}
	for _, p := range s.pairs {
		if p.Invoke.F != history.FAppend || p.Type() != history.OK || p.Invoke.Value.Expected == nil {
			continue
		}
		exp := *p.Invoke.Value.Expected
		k := key{p.Invoke.Value.Stream, exp}
		if w, ok := winners[k]; ok {
			s.add("cas-double-success", []int{w.Complete.Index, p.Complete.Index}, "two appends to %s expecting version %d both succeeded", k.stream, exp)
		}
		winners[k] = p
		if p.Complete.Result.Pos != exp+1 {
			s.add("cas-double-success", []int{p.Complete.Index}, "append to %s expecting version %d was written at position %d", k.stream, exp, p.Complete.Result.Pos)
		}
	}
	return true
}
