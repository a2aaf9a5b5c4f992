package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/skalddb/skald/jepsen/internal/history"
)

// Rules for histories with removals (the retention workload). Every
// removal the workload sends names the positions it removes: a truncate
// those below its bound, a soft delete with an expected version E those up
// to E (bound E+1; the server refuses it unless the stream is at E). Both
// remove a prefix of the stream, and positions are never reused, so:
//
//   - removed-present: after an acknowledged removal, no node's final log
//     holds a message of its stream below its bound.
//   - removed-read: a read invoked after an acknowledged removal returned
//     returns no message of its stream below its bound.
//   - lost (durability.go) excuses an acknowledged message only when a
//     removal that may have been applied (ok or info) has a bound above
//     its position: every other acknowledged message survives.
//   - stream-hole: a final stream's positions are consecutive (what
//     survives prefix removals is a suffix), in increasing global order
//     (order-mismatch); read-hole: so is every read's slice of a stream.
//   - read-mismatch: a message a read returned sits where the final log has
//     it (same stream, position and global position).
//   - global-dup / global-order: the final log's global positions strictly
//     increase (removals leave gaps, never reuse).
//
// divergence (every node's final log the same) and realtime-order keep
// their meaning and run too.
//
// Max-count policies (Input.MaxCount, per category) remove without an
// operation in the history: the leader's expiry entries take a capped
// stream's positions up to its version - count. So:
//
//   - lost also excuses a position at or below top - count, top being the
//     highest position of the stream anything showed (the version only
//     grows, and expiry never goes past version - count).
//   - capped-lost: a read (or a node's final log) whose last message of a
//     capped stream is at position M holds every acknowledged message at
//     positions M-count+1..M (that it asked for) that no truncate or
//     delete covers. M is then the stream's version in the state read
//     (removals take prefixes, so nothing after M survives a removal that
//     spared M), and expiry never removes past version - count.

// removal is one truncate or delete that may have been applied.
type removal struct {
	bound int64 // positions below it go
	pair  *history.Pair
}

// indexRemovals fills s.removals; it reports whether the history has any
// removal at all (acknowledged, indeterminate or failed).
func (s *state) indexRemovals() bool {
	s.removals = map[string][]removal{}
	found := false
	for i := range s.pairs {
		p := &s.pairs[i]
		v := p.Invoke.Value
		var bound int64
		switch p.Invoke.F {
		case history.FTruncate:
			bound = v.From
		case history.FDelete:
			if v.Expected == nil {
				continue // the workload always sends one; without it the bound is unknown
			}
			bound = *v.Expected + 1
		case history.FWatermark:
			// One removal per stream, each a prefix up to its watermark.
			found = true
			if p.Type() == history.Fail {
				continue
			}
			for stream, w := range v.Watermarks {
				s.removals[stream] = append(s.removals[stream], removal{bound: w + 1, pair: p})
			}
			continue
		default:
			continue
		}
		found = true
		if p.Type() == history.Fail {
			continue
		}
		s.removals[v.Stream] = append(s.removals[v.Stream], removal{bound: bound, pair: p})
	}
	if len(s.maxCount) > 0 || len(s.maxAge) > 0 {
		found = true
		s.indexCapped()
	}
	return found
}

// indexCapped fills s.top and s.acked for the max-count rules.
func (s *state) indexCapped() {
	s.top, s.acked = map[string]int64{}, map[history.Event]ackedMsg{}
	see := func(stream string, pos int64) { s.top[stream] = max(s.top[stream], pos) }
	for i := range s.pairs {
		p := &s.pairs[i]
		if p.Type() != history.OK || p.Complete.Result == nil {
			continue
		}
		r := p.Complete.Result
		if p.Invoke.F == history.FAppend {
			for k, id := range p.Invoke.Value.IDs {
				see(p.Invoke.Value.Stream, r.Pos+int64(k))
				s.acked[history.Event{Stream: p.Invoke.Value.Stream, Pos: r.Pos + int64(k)}] = ackedMsg{id, p.Call()}
			}
		}
		for _, e := range r.Events {
			see(e.Stream, e.Pos)
		}
	}
	for _, evs := range s.final {
		for _, e := range evs {
			see(e.Stream, e.Pos)
		}
	}
}

// capOf is the max-count of stream's category (0: none).
func (s *state) capOf(stream string) int64 {
	cat, _, _ := strings.Cut(stream, "-")
	return s.maxCount[cat]
}

// ageOf is the max-age of stream's category (0: none).
func (s *state) ageOf(stream string) time.Duration {
	cat, _, _ := strings.Cut(stream, "-")
	return s.maxAge[cat]
}

// expirable reports whether expiry may have removed position pos: below a
// count limit's reach, or any message under an age limit (the final logs
// are read after a healing wait of unknown length, when every message may
// have aged out; reads check ages instead: aged-early).
func (s *state) expirable(stream string, pos int64) bool {
	if s.ageOf(stream) > 0 {
		return true
	}
	n := s.capOf(stream)
	return n > 0 && pos <= s.top[stream]-n
}

// ageSlack covers the difference between the harness's monotonic clock
// (operation times) and the leader's wall clock (message and expiry
// times) on the one machine the nodes share.
const ageSlack = int64(100 * time.Millisecond)

// checkExpiry: capped-lost over stream reads and final logs, aged-early
// over stream reads.
func checkExpiry(s *state) bool {
	if len(s.maxCount) == 0 && len(s.maxAge) == 0 {
		return true
	}
	// agedEarly reports the first acknowledged message of stream at
	// from..last that a read returning at ret lacks although it cannot
	// have been older than the age limit before ret: the leader stamped it
	// after its append was invoked, and stamped any expiry entry the read
	// saw before the read returned.
	agedEarly := func(stream string, from, last, ret int64, have map[int64]bool, ops []int, where string) {
		age := int64(s.ageOf(stream))
		if age == 0 {
			return
		}
		for p := from; p <= last; p++ {
			m, ok := s.acked[history.Event{Stream: stream, Pos: p}]
			if ok && !have[p] && !s.removedExplicitly(stream, p) && ret+ageSlack < m.call+age {
				s.add("aged-early", ops, "%s: %s lacks acknowledged %s/%d (id %s), appended %v before the read returned, under a max-age of %v",
					where, stream, stream, p, m.id, time.Duration(ret-m.call), time.Duration(age))
				return
			}
		}
	}
	// check reports the first acknowledged message of stream in
	// (last-count, last] at or above from that evs lacks, and, for a read
	// (ret > 0), the first one too young to have gone.
	check := func(stream string, from int64, evs []history.Event, where string, ops []int, ret int64) {
		if len(evs) == 0 {
			return
		}
		n := s.capOf(stream)
		have := map[int64]bool{}
		last := int64(-1)
		for _, e := range evs {
			if e.Stream == stream {
				have[e.Pos] = true
				last = max(last, e.Pos)
			}
		}
		if last < 0 {
			return
		}
		if ret > 0 {
			agedEarly(stream, from, last, ret, have, ops, where)
		}
		if n == 0 {
			return
		}
		for p := max(from, last-n+1); p <= last; p++ {
			m, ok := s.acked[history.Event{Stream: stream, Pos: p}]
			if ok && !have[p] && !s.removedExplicitly(stream, p) {
				s.add("capped-lost", ops, "%s: %s ends at position %d but lacks acknowledged %s/%d (id %s), which a max-count of %d keeps",
					where, stream, last, stream, p, m.id, n)
				return
			}
		}
	}
	for _, p := range s.pairs {
		if p.Invoke.F != history.FReadStream || p.Type() != history.OK || p.Complete.Result == nil {
			continue
		}
		evs := p.Complete.Result.Events
		if p.Invoke.Value.Limit > 0 && int64(len(evs)) >= p.Invoke.Value.Limit {
			continue // a page: its last message need not be the stream's
		}
		check(p.Invoke.Value.Stream, p.Invoke.Value.From, evs, fmt.Sprintf("read on %s", p.Invoke.Node), []int{p.Complete.Index}, p.Return())
	}
	nodes := make([]string, 0, len(s.final))
	for n := range s.final {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		streams := map[string]bool{}
		for _, e := range s.final[n] {
			streams[e.Stream] = true
		}
		for st := range streams {
			check(st, 0, s.final[n], "final log of "+n, nil, 0)
		}
	}
	return true
}

// removable reports whether a removal that may have been applied covers
// position pos of stream.
func (s *state) removable(stream string, pos int64) bool {
	return s.removedExplicitly(stream, pos) || s.expirable(stream, pos)
}

// removedExplicitly reports whether a truncate or delete that may have
// been applied covers position pos of stream.
func (s *state) removedExplicitly(stream string, pos int64) bool {
	for _, r := range s.removals[stream] {
		if pos < r.bound {
			return true
		}
	}
	return false
}

// ackedBound answers, per stream, the highest bound of the removals
// acknowledged before a time.
type ackedBound struct {
	ret []int64 // completion times, increasing
	max []int64 // highest bound among ret[:i+1]
}

func (s *state) ackedBounds() map[string]*ackedBound {
	out := map[string]*ackedBound{}
	for stream, rs := range s.removals {
		var ok []removal
		for _, r := range rs {
			if r.pair.Type() == history.OK {
				ok = append(ok, r)
			}
		}
		sort.Slice(ok, func(i, j int) bool { return ok[i].pair.Return() < ok[j].pair.Return() })
		b := &ackedBound{}
		m := int64(0)
		for _, r := range ok {
			m = max(m, r.bound)
			b.ret, b.max = append(b.ret, r.pair.Return()), append(b.max, m)
		}
		out[stream] = b
	}
	return out
}

// before is the highest bound acknowledged before time t (0: none).
func (b *ackedBound) before(t int64) int64 {
	if b == nil {
		return 0
	}
	i := sort.Search(len(b.ret), func(i int) bool { return b.ret[i] >= t })
	if i == 0 {
		return 0
	}
	return b.max[i-1]
}

// checkTombstones: tombstone-write. After an acknowledged hard delete at
// version E (it applied only with the stream at E, and every later append
// is refused), no append to the stream invoked after the acknowledgement
// may succeed, and no node's final log may hold a message of the stream.
func checkTombstones(s *state) {
	tombs := map[string]int64{} // stream → earliest acknowledgement of a hard delete
	for _, p := range s.pairs {
		if p.Invoke.F == history.FDelete && p.Invoke.Value.Hard && p.Type() == history.OK {
			st := p.Invoke.Value.Stream
			if t, ok := tombs[st]; !ok || p.Return() < t {
				tombs[st] = p.Return()
			}
		}
	}
	if len(tombs) == 0 {
		return
	}
	for _, p := range s.pairs {
		if t, ok := tombs[p.Invoke.Value.Stream]; ok && p.Invoke.F == history.FAppend && p.Type() == history.OK && p.Call() > t {
			s.add("tombstone-write", []int{p.Complete.Index}, "append to %s on %s invoked after its hard delete was acknowledged succeeded at position %d",
				p.Invoke.Value.Stream, p.Invoke.Node, p.Complete.Result.Pos)
		}
	}
	nodes := make([]string, 0, len(s.final))
	for n := range s.final {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		for _, e := range s.final[n] {
			if _, ok := tombs[e.Stream]; ok {
				s.add("tombstone-write", nil, "final log of %s holds %s/%d (id %s) of a hard-deleted stream", n, e.Stream, e.Pos, e.ID)
				break
			}
		}
	}
}

// checkRemovals: removed-present, removed-read and tombstone-write.
func checkRemovals(s *state) bool {
	checkTombstones(s)
	bounds := s.ackedBounds()
	const end = 1<<63 - 1
	nodes := make([]string, 0, len(s.final))
	for n := range s.final {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		for _, e := range s.final[n] {
			if b := bounds[e.Stream].before(end); e.Pos < b {
				s.add("removed-present", nil, "final log of %s holds %s/%d (id %s), below the acknowledged removal bound %d", n, e.Stream, e.Pos, e.ID, b)
			}
		}
	}
	for _, p := range s.pairs {
		if (p.Invoke.F != history.FReadStream && p.Invoke.F != history.FReadCategory) || p.Type() != history.OK || p.Complete.Result == nil {
			continue
		}
		for _, e := range p.Complete.Result.Events {
			if b := bounds[e.Stream].before(p.Call()); e.Pos < b {
				s.add("removed-read", []int{p.Complete.Index}, "%s on %s invoked after the removal of %s below %d was acknowledged returned position %d (id %s)",
					p.Invoke.F, p.Invoke.Node, e.Stream, b, e.Pos, e.ID)
				break
			}
		}
	}
	return true
}

// checkRetentionStreams: stream-hole, order-mismatch, read-hole,
// read-mismatch, global-dup, global-order.
func checkRetentionStreams(s *state) bool {
	for name, evs := range s.streams {
		for i := 1; i < len(evs); i++ {
			if evs[i].Pos != evs[i-1].Pos+1 {
				s.add("stream-hole", nil, "stream %s: position %d follows %d in the final log of %s", name, evs[i].Pos, evs[i-1].Pos, s.refNode)
				break
			}
			if evs[i].Global <= evs[i-1].Global {
				s.add("order-mismatch", nil, "stream %s: position %d has global %d, not after %d", name, evs[i].Pos, evs[i].Global, evs[i-1].Global)
				break
			}
		}
	}
	for i := 1; i < len(s.ref); i++ {
		if g, prev := s.ref[i].Global, s.ref[i-1].Global; g <= prev {
			kind := "global-order"
			if g == prev {
				kind = "global-dup"
			}
			s.add(kind, nil, "final log of %s: entry %d has global position %d after %d", s.refNode, i, g, prev)
			break
		}
	}
	for _, p := range s.pairs {
		if (p.Invoke.F != history.FReadStream && p.Invoke.F != history.FReadCategory) || p.Type() != history.OK || p.Complete.Result == nil {
			continue
		}
		last := map[string]int64{}
		for _, e := range p.Complete.Result.Events {
			if f, ok := s.finalBy[e.ID]; ok && f != e {
				s.add("read-mismatch", []int{p.Complete.Index}, "%s on %s returned %+v, the final log has %+v", p.Invoke.F, p.Invoke.Node, e, f)
				break
			}
			if prev, ok := last[e.Stream]; ok && e.Pos != prev+1 {
				s.add("read-hole", []int{p.Complete.Index}, "%s on %s returned %s/%d after %s/%d", p.Invoke.F, p.Invoke.Node, e.Stream, e.Pos, e.Stream, prev)
				break
			}
			last[e.Stream] = e.Pos
		}
	}
	return true
}
