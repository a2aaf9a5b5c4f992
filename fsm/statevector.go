package fsm

import (
	"fmt"
	"sort"
)

// A state vector is what a reader of a category already holds: per
// stream, the highest position it has (seed 003's backfill, "every
// message after my state vector"). A category read with one
// (CategoryQuery.After) returns, in global order, the category's messages
// above the held position of their stream, and every message of a stream
// the vector does not name. The held position is compared with the
// message's own (read from M), so the answer holds whatever order imports
// gave positions and global positions.

// MaxStateVector is the most streams one state vector names.
const MaxStateVector = 10000

// ValidateStateVector checks a state vector for a read of category: at
// most MaxStateVector streams, each a valid stream name of that category
// (any category when category is ""), each position at least 0. field is
// the request's name for it. Streams are checked in name order, so the
// error a bad vector gets does not depend on map order.
func ValidateStateVector(field, category string, sv map[string]int64) error {
	if len(sv) > MaxStateVector {
		return invalid(field, "must name at most %d streams, got %d", MaxStateVector, len(sv))
	}
	streams := make([]string, 0, len(sv))
	for s := range sv {
		streams = append(streams, s)
	}
	sort.Strings(streams)
	for _, s := range streams {
		f := fmt.Sprintf("%s[%q]", field, s)
		if err := ValidateStreamName(f, s); err != nil {
			return err
		}
		if category != "" && Category(s) != category {
			return invalid(f, "stream %q is not of category %q", s, category)
		}
		if sv[s] < 0 {
			return invalid(f, "must not be negative, got %d", sv[s])
		}
	}
	return nil
}

// held reports whether the state vector sv already holds m.
func held(sv map[string]int64, m *Message) bool {
	pos, ok := sv[m.Stream]
	return ok && m.Position <= pos
}
