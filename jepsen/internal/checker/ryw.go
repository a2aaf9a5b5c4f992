package checker

import "github.com/skalddb/skald/jepsen/internal/history"

// checkRYW: a session read with min_index T sees every acknowledged append
// whose Raft index is at most T.
func checkRYW(s *state) bool {
	ran := false
	byScope := map[string][]history.Pair{}
	for _, a := range s.pairs {
		if a.Invoke.F == history.FAppend && a.Type() == history.OK {
			st := a.Invoke.Value.Stream
			byScope["s/"+st] = append(byScope["s/"+st], a)
			byScope["c/"+category(st)] = append(byScope["c/"+category(st)], a)
		}
	}
	for _, p := range s.pairs {
		if (p.Invoke.F != history.FReadStream && p.Invoke.F != history.FReadCategory) || p.Type() != history.OK || p.Complete.Result == nil {
			continue
		}
		v, res := p.Invoke.Value, p.Complete.Result
		if v.Consistency != history.Session || v.MinIndex == 0 {
			continue
		}
		ran = true
		last, truncated := readEnd(v, res)
		seen := map[string]bool{}
		for _, e := range res.Events {
			seen[e.ID] = true
		}
		for _, a := range byScope[scopeKey(p.Invoke.F, v)] {
			if a.Complete.Result.Index > v.MinIndex {
				continue
			}
			id := a.Invoke.Value.IDs[0]
			e, ok := s.finalBy[id]
			if !ok || seen[id] || !inScope(v, p.Invoke.F, e) || (truncated && e.Global > last) {
				continue
			}
			s.add("ryw-violation", []int{p.Complete.Index, a.Complete.Index}, "session %s on %s with min_index %d misses %s (index %d)", p.Invoke.F, p.Invoke.Node, v.MinIndex, id, a.Complete.Result.Index)
			break
		}
	}
	return ran
}
