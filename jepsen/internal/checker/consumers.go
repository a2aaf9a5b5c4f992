package checker

import (
	"sort"

	"github.com/skalddb/skald/jepsen/internal/history"
)

// The consumers workload's rules (persistent subscriptions, at least
// once). The group reads one category from its first message; after the
// run every message of that category in the final log must have been
// delivered and acknowledged at least once:
//
//	group-undelivered  a final-log message of the category was never delivered
//	group-unacked      it was delivered but no ack of it succeeded or may have
//	group-foreign      a delivery of a message the final log does not hold in the category
//	group-order        under the pinned strategy, a stream's messages were first
//	                   delivered out of position order
//
// Redeliveries are counted, not flagged: at least once allows them.

// groupCategory is the category the workload's group reads.
const groupCategory = "acct"

func checkConsumers(s *state) bool {
	type first struct {
		pos, at int64
		op      int
	}
	delivered := map[string]int{}
	settled := map[string]bool{} // an ack ok or info
	firsts := map[string]map[string]first{}
	var deliveries, acksOK int
	for _, p := range s.pairs {
		switch p.Invoke.F {
		case history.FDeliver:
			if p.Type() != history.OK || p.Complete.Result == nil || len(p.Invoke.Value.IDs) != 1 {
				continue
			}
			id, r := p.Invoke.Value.IDs[0], p.Complete.Result
			deliveries++
			delivered[id]++
			e, ok := s.finalBy[id]
			if !ok || category(e.Stream) != groupCategory || e.Pos != r.Pos || e.Global != r.Global {
				s.add("group-foreign", []int{p.Complete.Index}, "delivery of %s (stream %s position %d, global %d) is not that message of category %s in the final log",
					id, r.Stream, r.Pos, r.Global, groupCategory)
				continue
			}
			if firsts[e.Stream] == nil {
				firsts[e.Stream] = map[string]first{}
			}
			if _, seen := firsts[e.Stream][id]; !seen {
				firsts[e.Stream][id] = first{pos: e.Pos, at: p.Return(), op: p.Complete.Index}
			}
		case history.FAck:
			if len(p.Invoke.Value.IDs) != 1 {
				continue
			}
			switch p.Type() {
			case history.OK:
				acksOK++
				settled[p.Invoke.Value.IDs[0]] = true
			case history.Info:
				settled[p.Invoke.Value.IDs[0]] = true
			}
		}
	}
	for _, e := range s.ref {
		if category(e.Stream) != groupCategory {
			continue
		}
		switch {
		case delivered[e.ID] == 0:
			s.add("group-undelivered", nil, "message %s (stream %s position %d, global %d) was never delivered", e.ID, e.Stream, e.Pos, e.Global)
		case !settled[e.ID]:
			s.add("group-unacked", nil, "message %s (stream %s position %d, global %d) was delivered %d times, never acknowledged", e.ID, e.Stream, e.Pos, e.Global, delivered[e.ID])
		}
	}
	for stream, byID := range firsts {
		fs := make([]first, 0, len(byID))
		for _, f := range byID {
			fs = append(fs, f)
		}
		sort.Slice(fs, func(i, j int) bool { return fs[i].at < fs[j].at })
		for i := 1; i < len(fs); i++ {
			if fs[i].pos < fs[i-1].pos {
				s.add("group-order", []int{fs[i-1].op, fs[i].op}, "stream %s: position %d first delivered after position %d", stream, fs[i].pos, fs[i-1].pos)
			}
		}
	}
	st := &s.res.Stats
	st.Deliveries, st.AcksOK = deliveries, acksOK
	for _, n := range delivered {
		st.Redeliveries += n - 1
	}
	return true
}

// hasDeliveries reports whether the history comes from the consumers
// workload.
func (s *state) hasDeliveries() bool {
	for _, p := range s.pairs {
		if p.Invoke.F == history.FDeliver {
			return true
		}
	}
	return false
}
