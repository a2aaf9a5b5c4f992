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
