package checker

import (
	"sort"
	"strings"

	"github.com/skalddb/skald/jepsen/internal/history"
)

// mergeRetries folds the attempts of one logical append into one pair: the
// operations carrying the same ids (the idempotent workload sends an
// append again, as a new operation, while its outcome is unknown, and
// hedges some through two nodes at once). Other workloads never repeat
// ids, so for them it changes nothing. Before folding it checks that the
// attempts agree:
//
//   - retry-mismatch: two acknowledged attempts report different positions
//     (a retry must get the original's);
//   - phantom-duplicate: every attempt was acknowledged as a duplicate, so
//     the server claims an earlier write that nobody sent.
//
// The folded pair is invoked when the first attempt was and completes as
// the first acknowledgement (ok), else as unknown if any attempt was
// (info), else as the first certain failure (fail). The durability,
// order and read rules then see one append per id, and the final log must
// hold every id exactly once (duplicate).
func mergeRetries(s *state) {
	groups := map[string][]int{}
	var keys []string
	for i, p := range s.pairs {
		if p.Invoke.F != history.FAppend || len(p.Invoke.Value.IDs) == 0 {
			continue
		}
		k := strings.Join(p.Invoke.Value.IDs, ",")
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	drop := map[int]bool{}
	for _, k := range keys {
		idx := groups[k]
		if len(idx) < 2 {
			continue
		}
		s.res.Stats.Retried++
		first := idx[0]
		var ok, info, fail *history.Pair
		allDup := true
		for _, i := range idx {
			p := &s.pairs[i]
			if p.Invoke.Time < s.pairs[first].Invoke.Time {
				first = i
			}
			switch p.Type() {
			case history.OK:
				r := p.Complete.Result
				if !r.Duplicate {
					allDup = false
				}
				if ok != nil && (ok.Complete.Result.Pos != r.Pos || ok.Complete.Result.Global != r.Global) {
					s.add("retry-mismatch", []int{ok.Complete.Index, p.Complete.Index},
						"attempts of one append (ids %s) were acknowledged at %s/%d global %d and %s/%d global %d",
						k, ok.Invoke.Value.Stream, ok.Complete.Result.Pos, ok.Complete.Result.Global, p.Invoke.Value.Stream, r.Pos, r.Global)
				}
				if ok == nil || p.Return() < ok.Return() {
					ok = p
				}
			case history.Info:
				allDup = false
				if info == nil || p.Return() > info.Return() {
					info = p
				}
			default:
				allDup = false
				if fail == nil || p.Return() < fail.Return() {
					fail = p
				}
			}
		}
		if ok != nil && allDup {
			s.add("phantom-duplicate", []int{ok.Complete.Index}, "every attempt of one append (ids %s) was acknowledged as a duplicate of a write nobody sent", k)
		}
		merged := history.Pair{Invoke: s.pairs[first].Invoke}
		switch {
		case ok != nil:
			merged.Complete = ok.Complete
		case info != nil:
			merged.Complete = info.Complete
		default:
			merged.Complete = fail.Complete
		}
		for _, i := range idx {
			drop[i] = true
		}
		drop[first] = false
		s.pairs[first] = merged
	}
	if len(drop) == 0 {
		return
	}
	out := s.pairs[:0]
	for i, p := range s.pairs {
		if !drop[i] {
			out = append(out, p)
		}
	}
	s.pairs = out
	sort.SliceStable(s.pairs, func(i, j int) bool { return s.pairs[i].Invoke.Index < s.pairs[j].Invoke.Index })
}
