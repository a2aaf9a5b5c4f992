package checker

import (
	"sort"

	"github.com/skalddb/skald/jepsen/internal/history"
)

// categoryLog is the final log's events of one category, in global order.
func (s *state) categoryLog(cat string) []history.Event {
	var out []history.Event
	for _, e := range s.ref {
		if category(e.Stream) == cat {
			out = append(out, e)
		}
	}
	return out
}

// checkCategory: a category read returns exactly the final category
// subsequence from the global position asked for, in global order,
// possibly cut short at its end: never a foreign stream
// (category-foreign), never out of order (category-order), never with a
// hole (category-hole).
func checkCategory(s *state) bool {
	logs := map[string][]history.Event{}
	for _, p := range s.pairs {
		if p.Invoke.F != history.FReadCategory || p.Type() != history.OK || p.Complete.Result == nil {
			continue
		}
		v := p.Invoke.Value
		log, ok := logs[v.Category]
		if !ok {
			log = s.categoryLog(v.Category)
			logs[v.Category] = log
		}
		start := sort.Search(len(log), func(i int) bool { return log[i].Global >= v.From })
		got := p.Complete.Result.Events
		for k, e := range got {
			if category(e.Stream) != v.Category {
				s.add("category-foreign", []int{p.Complete.Index}, "read of category %s returned %+v", v.Category, e)
				break
			}
			if k > 0 && e.Global <= got[k-1].Global {
				s.add("category-order", []int{p.Complete.Index}, "read of category %s: global %d after %d", v.Category, e.Global, got[k-1].Global)
				break
			}
			if i := start + k; i >= len(log) || log[i] != e {
				var w history.Event
				if i < len(log) {
					w = log[i]
				}
				s.add("category-hole", []int{p.Complete.Index}, "read of category %s from %d on %s (%s): event %d is %+v, final log has %+v", v.Category, v.From, p.Invoke.Node, v.Consistency, k, e, w)
				break
			}
		}
	}
	return true
}

// inScope reports whether event e could be returned by read r.
func inScope(r history.Value, f string, e history.Event) bool {
	switch f {
	case history.FReadStream:
		return e.Stream == r.Stream && e.Pos >= r.From
	case history.FReadCategory:
		return category(e.Stream) == r.Category && e.Global >= r.From
	}
	return false
}

// readEnd is the last global position a read covers: reads are prefixes
// (checked above), so every in-scope event up to it was returned. A read
// cut short by its limit covers only what it returned; an uncut one also
// covers everything up to the applied state it read (unknown here), so the
// bound is its last event and the check is one-sided.
func readEnd(r history.Value, res *history.Result) (last int64, truncated bool) {
	last = -1
	if n := len(res.Events); n > 0 {
		last = res.Events[n-1].Global
	}
	return last, r.Limit > 0 && int64(len(res.Events)) >= r.Limit
}

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

func scopeKey(f string, v history.Value) string {
	if f == history.FReadStream {
		return "s/" + v.Stream
	}
	return "c/" + v.Category
}

func describe(v history.Value) string {
	if v.Stream != "" {
		return v.Stream
	}
	return "category " + v.Category
}
