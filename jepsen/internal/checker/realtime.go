package checker

import "github.com/skalddb/skald/jepsen/internal/history"

// checkRealtimeReads: a linearizable read sees every append acknowledged
// before it was invoked (stale-read) and nothing appended after it
// returned (future-read). Indeterminate appends count as acknowledged at
// infinity.
func checkRealtimeReads(s *state) bool {
	type okAppend struct {
		e   history.Event
		p   *history.Pair
		ret int64
	}
	byScope := map[string][]okAppend{}
	for id, p := range s.appends {
		e, ok := s.finalBy[id]
		if !ok {
			continue
		}
		ret := p.Return()
		if p.Type() != history.OK {
			ret = 1<<63 - 1
		}
		a := okAppend{e, p, ret}
		byScope["s/"+e.Stream] = append(byScope["s/"+e.Stream], a)
		byScope["c/"+category(e.Stream)] = append(byScope["c/"+category(e.Stream)], a)
	}
	for _, p := range s.pairs {
		if (p.Invoke.F != history.FReadStream && p.Invoke.F != history.FReadCategory) || p.Type() != history.OK || p.Complete.Result == nil {
			continue
		}
		v, res := p.Invoke.Value, p.Complete.Result
		if v.Consistency != history.Linearizable {
			continue
		}
		last, truncated := readEnd(v, res)
		seen := map[string]bool{}
		for _, e := range res.Events {
			seen[e.ID] = true
			if a, ok := s.appends[e.ID]; ok && a.Call() > p.Return() {
				s.add("future-read", []int{p.Complete.Index, a.Invoke.Index}, "%s on %s returned %s, appended only after the read returned", p.Invoke.F, p.Invoke.Node, e.ID)
			}
		}
		for _, a := range byScope[scopeKey(p.Invoke.F, v)] {
			if a.ret >= p.Call() || seen[a.e.ID] || !inScope(v, p.Invoke.F, a.e) {
				continue
			}
			if truncated && a.e.Global > last {
				continue
			}
			s.add("stale-read", []int{p.Complete.Index, a.p.Complete.Index}, "linearizable %s on %s (%s) misses %s (global %d), acknowledged before the read began", p.Invoke.F, p.Invoke.Node, describe(v), a.e.ID, a.e.Global)
			break
		}
	}
	return true
}
