package checker

import "github.com/skalddb/skald/jepsen/internal/history"

// checkDurability: acknowledged appends are in the final log with the
// positions their acknowledgement gave (lost, ack-mismatch); appends that
// certainly failed are nowhere (phantom); nothing appears that nobody
// appended or appears twice (unexpected, duplicate); an indeterminate
// append some read saw is in the final log (observed-then-lost). A message
// a removal may have taken (removable) is excused from lost,
// observed-then-lost and partial-append.
func checkDurability(s *state) bool {
	for id, n := range s.count {
		if n > 1 {
			s.add("duplicate", nil, "message %s is %d times in the final log of %s", id, n, s.refNode)
		}
		if _, ok := s.appends[id]; !ok {
			s.add("unexpected", nil, "message %s in the final log was never appended", id)
		}
	}
	for _, p := range s.pairs {
		if p.Invoke.F == history.FAppend {
			s.checkAppend(p)
			continue
		}
		if p.Type() != history.OK || p.Complete.Result == nil {
			continue
		}
		for _, e := range p.Complete.Result.Events {
			a, ok := s.appends[e.ID]
			switch {
			case !ok:
				s.add("unexpected", []int{p.Complete.Index}, "%s on %s returned message %s that was never appended", p.Invoke.F, p.Invoke.Node, e.ID)
			case a.Type() == history.Fail:
				s.add("phantom", []int{a.Complete.Index, p.Complete.Index}, "%s on %s returned message %s of an append that failed (%s)", p.Invoke.F, p.Invoke.Node, e.ID, a.Complete.Error)
			}
		}
	}
	return true
}

func (s *state) checkAppend(p history.Pair) {
	ids := p.Invoke.Value.IDs
	switch p.Type() {
	case history.OK:
		r := p.Complete.Result
		for k, id := range ids {
			e, ok := s.finalBy[id]
			if !ok && s.removable(p.Invoke.Value.Stream, r.Pos+int64(k)) {
				continue
			}
			if !ok {
				s.add("lost", []int{p.Complete.Index}, "acknowledged message %s (append to %s at position %d on %s) is not in the final log", id, p.Invoke.Value.Stream, r.Pos+int64(k), p.Invoke.Node)
				continue
			}
			if e.Stream != p.Invoke.Value.Stream || e.Pos != r.Pos+int64(k) || e.Global != r.Global+int64(k) {
				s.add("ack-mismatch", []int{p.Complete.Index}, "message %s acknowledged at %s/%d global %d, final log has %s/%d global %d",
					id, p.Invoke.Value.Stream, r.Pos+int64(k), r.Global+int64(k), e.Stream, e.Pos, e.Global)
			}
		}
	case history.Fail:
		for _, id := range ids {
			if _, ok := s.finalBy[id]; ok {
				s.add("phantom", []int{p.Complete.Index}, "message %s of an append that failed (%s) is in the final log", id, p.Complete.Error)
			}
		}
	case history.Info:
		present, anchor := 0, -1
		for k, id := range ids {
			if _, ok := s.finalBy[id]; ok {
				present, anchor = present+1, k
			} else if t, seen := s.observed[id]; seen && !s.removable(s.seen[id].Stream, s.seen[id].Pos) {
				s.add("observed-then-lost", []int{p.Invoke.Index}, "message %s of an indeterminate append was read (by %d ns) but is not in the final log", id, t)
			}
		}
		// The messages of one append have consecutive positions: those of
		// the absent ones follow from a present one.
		excused := true
		for k, id := range ids {
			if _, ok := s.finalBy[id]; !ok && anchor >= 0 {
				excused = excused && s.removable(p.Invoke.Value.Stream, s.finalBy[ids[anchor]].Pos+int64(k-anchor))
			}
		}
		if present > 0 && present < len(ids) && !excused {
			s.add("partial-append", []int{p.Invoke.Index}, "only %d of %d messages of one append are in the final log", present, len(ids))
		}
		if present > 0 {
			s.res.Stats.Recovered++
		} else {
			s.res.Stats.LostUnacked++
		}
	}
}

// checkConvergence: every node's final log equals the reference.
func checkConvergence(s *state, final map[string][]history.Event, nodes []string) {
	for _, n := range nodes {
		f, ok := final[n]
		if !ok || n == s.refNode {
			continue
		}
		if len(f) != len(s.ref) {
			s.add("divergence", nil, "node %s has %d events, node %s has %d", n, len(f), s.refNode, len(s.ref))
		}
		for i := range min(len(f), len(s.ref)) {
			if f[i] != s.ref[i] {
				s.add("divergence", nil, "event %d differs: node %s has %+v, node %s has %+v", i, n, f[i], s.refNode, s.ref[i])
				break
			}
		}
	}
}
