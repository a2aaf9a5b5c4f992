package checker

import (
	"sort"
	"strings"

	"github.com/skalddb/skald/jepsen/internal/history"
)

// checkDCB replays the final log against every conditional append (the dcb
// workload). An acknowledged one promised that no message carrying any of
// its condition's tags lies between its condition's position and its own:
// such a message is a "dcb-conflict" (two decisions that each should have
// excluded the other both succeeded). A refused one named its first
// match: that message must exist, above the position, with one of the
// tags, else the refusal was false ("dcb-false-failure"). A history
// without conditional appends passes, as checkCAS's without CAS does.
func checkDCB(s *state) bool {
	for _, p := range s.pairs {
		c := p.Invoke.Value.Condition
		if p.Invoke.F != history.FAppend || c == nil {
			continue
		}
		switch p.Type() {
		case history.OK:
			e, ok := s.finalBy[p.Invoke.Value.IDs[0]]
			if !ok {
				continue // lost: durability reports it
			}
			for _, m := range s.between(c.After, e.Global) {
				if anyTag(m.Tags, c.AnyTags) {
					s.add("dcb-conflict", []int{p.Complete.Index}, "append %s at global position %d succeeded on condition that nothing tagged %v came after %d, but message %s at %d is tagged %s",
						e.ID, e.Global, c.AnyTags, c.After, m.ID, m.Global, m.Tags)
					break
				}
			}
		case history.Fail:
			r := p.Complete.Result
			if r == nil || r.Match == 0 {
				continue // refused for another reason
			}
			m, ok := s.at(r.Match)
			if !ok || m.Global <= c.After || !anyTag(m.Tags, c.AnyTags) {
				s.add("dcb-false-failure", []int{p.Complete.Index}, "append %v was refused for a match at %d (condition: tagged %v after %d), but the final log holds %+v there",
					p.Invoke.Value.IDs, r.Match, c.AnyTags, c.After, m)
			}
		}
	}
	return true
}

// between returns the reference log's messages with a global position in
// (lo, hi).
func (s *state) between(lo, hi int64) []history.Event {
	i := sort.Search(len(s.ref), func(i int) bool { return s.ref[i].Global > lo })
	j := sort.Search(len(s.ref), func(j int) bool { return s.ref[j].Global >= hi })
	if i >= j {
		return nil
	}
	return s.ref[i:j]
}

// at returns the reference log's message at global position gp.
func (s *state) at(gp int64) (history.Event, bool) {
	i := sort.Search(len(s.ref), func(i int) bool { return s.ref[i].Global >= gp })
	if i < len(s.ref) && s.ref[i].Global == gp {
		return s.ref[i], true
	}
	return history.Event{}, false
}

// anyTag reports whether the comma-joined tags hold one of want.
func anyTag(tags string, want []string) bool {
	for _, t := range strings.Split(tags, ",") {
		for _, w := range want {
			if t == w {
				return true
			}
		}
	}
	return false
}
