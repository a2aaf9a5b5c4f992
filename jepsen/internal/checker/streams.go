package checker

import "github.com/skalddb/skald/jepsen/internal/history"

// checkStreams: every final stream holds positions 0..n-1 in global order
// (stream-gap, order-mismatch), and every stream read returned exactly a
// slice of it starting at the position asked for (incompatible-order).
func checkStreams(s *state) bool {
	for name, evs := range s.streams {
		for i, e := range evs {
			if e.Pos != int64(i) {
				s.add("stream-gap", nil, "stream %s: entry %d of the final log has position %d", name, i, e.Pos)
				break
			}
			if i > 0 && e.Global <= evs[i-1].Global {
				s.add("order-mismatch", nil, "stream %s: position %d has global %d, not after %d", name, e.Pos, e.Global, evs[i-1].Global)
				break
			}
		}
	}
	for _, p := range s.pairs {
		if p.Invoke.F != history.FReadStream || p.Type() != history.OK || p.Complete.Result == nil {
			continue
		}
		v := p.Invoke.Value
		want := s.streams[v.Stream]
		got := p.Complete.Result.Events
		if v.Limit > 0 && int64(len(got)) > v.Limit {
			s.add("incompatible-order", []int{p.Complete.Index}, "read of %s returned %d events, limit %d", v.Stream, len(got), v.Limit)
		}
		for k, e := range got {
			i := v.From + int64(k)
			if i >= int64(len(want)) || want[i] != e {
				var w history.Event
				if i < int64(len(want)) {
					w = want[i]
				}
				s.add("incompatible-order", []int{p.Complete.Index}, "read of %s from %d on %s (%s): event %d is %+v, final log has %+v", v.Stream, v.From, p.Invoke.Node, v.Consistency, k, e, w)
				break
			}
		}
	}
	return true
}

// checkGlobal: the final log's global positions are 1..N exactly once
// (global-gap, global-dup), and checkRealtimeOrder.
func checkGlobal(s *state) bool {
	for i, e := range s.ref {
		want := int64(i + 1)
		if e.Global != want {
			kind := "global-gap"
			if i > 0 && e.Global == s.ref[i-1].Global {
				kind = "global-dup"
			}
			s.add(kind, nil, "final log of %s: entry %d has global position %d, want %d", s.refNode, i, e.Global, want)
			break
		}
	}
	return checkRealtimeOrder(s)
}

// checkRealtimeOrder: appends acknowledged one after another in real time
// got increasing global positions (realtime-order), among the messages
// the final log holds.
func checkRealtimeOrder(s *state) bool {
	type ev struct {
		g            int64
		call, ret    int64
		invoke, done int
	}
	var evs []ev
	for id, e := range s.finalBy {
		p, ok := s.appends[id]
		if !ok || p.Invoke.Value.IDs[0] != id {
			continue
		}
		ret := p.Return()
		if p.Type() != history.OK {
			ret = 1<<63 - 1
		}
		evs = append(evs, ev{e.Global, p.Call(), ret, p.Invoke.Index, p.Complete.Index})
	}
	sortBy(evs, func(a, b ev) bool { return a.g < b.g })
	var maxCall int64 = -1
	maxAt := -1
	for i, e := range evs {
		if e.ret < maxCall {
			b := evs[maxAt]
			s.add("realtime-order", []int{e.done, b.invoke}, "append at global %d returned before the append at global %d was invoked", e.g, b.g)
		}
		if e.call > maxCall {
			maxCall, maxAt = e.call, i
		}
	}
	return true
}
