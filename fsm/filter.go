package fsm

import (
	"fmt"
	"slices"
	"strings"
)

// Filter keeps the messages of some types and of the streams whose name
// starts with a prefix: KurrentDB's $all filters, on ReadAll and
// ReadCategory. The zero Filter keeps every message.
type Filter struct {
	// Types: any of these (at most MaxQueryItemTypes); empty: any type.
	Types []string
	// StreamPrefix: streams whose name starts with it; empty: any stream.
	StreamPrefix string
}

// ValidateFilter checks a filter's types (as a query item's) and prefix
// (at most MaxStreamName bytes of UTF-8 without NUL, or empty). field is
// the request's prefix for field names ("" at the top level).
func ValidateFilter(field string, f Filter) error {
	if len(f.Types) > MaxQueryItemTypes {
		return invalid(field+"types", "must hold at most %d types, got %d", MaxQueryItemTypes, len(f.Types))
	}
	for i, t := range f.Types {
		if err := ValidateTypeName(fmt.Sprintf("%stypes[%d]", field, i), t); err != nil {
			return err
		}
	}
	if f.StreamPrefix != "" {
		return validateName(field+"stream_prefix", f.StreamPrefix, MaxStreamName)
	}
	return nil
}

func (f Filter) empty() bool { return len(f.Types) == 0 && f.StreamPrefix == "" }

// keepsStream reports whether the filter's prefix admits stream.
func (f Filter) keepsStream(stream []byte) bool {
	return len(stream) >= len(f.StreamPrefix) && string(stream[:len(f.StreamPrefix)]) == f.StreamPrefix
}

// keepsRaw reports whether a message of stream and type typ (a stored
// message's bytes, peekStreamType) passes the filter.
func (f Filter) keepsRaw(stream, typ []byte) bool {
	if !f.keepsStream(stream) {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if string(typ) == t {
			return true
		}
	}
	return false
}

// keeps reports whether m passes the filter.
func (f Filter) keeps(m *Message) bool {
	return strings.HasPrefix(m.Stream, f.StreamPrefix) && (len(f.Types) == 0 || slices.Contains(f.Types, m.Type))
}

// AllQuery selects messages of the whole namespace in global order.
type AllQuery struct {
	// GlobalPosition is the first global position returned (below 1
	// means 1); backward, the highest (negative: from the end).
	GlobalPosition int64
	// Limit: 0 means DefaultLimit, negative means unlimited.
	Limit int
	// Backward reads newest first.
	Backward bool
	Filter   Filter
}

// ReadAllQuery returns the namespace's messages that pass q.Filter. A
// forward read of some types in a namespace whose type index is complete
// merges the types' index lists (its cost follows the matches, as a
// Query's); any other filtered read scans the messages from the start
// position until the page is full or the namespace ends.
func (v *View) ReadAllQuery(q AllQuery) ([]Message, error) {
	limit := normLimit(q.Limit)
	if len(q.Filter.Types) > 0 && !q.Backward {
		ti, err := v.typeIndex()
		if err != nil {
			return nil, err
		}
		if ti.complete() {
			return v.query(Query{Items: []QueryItem{{Types: q.Filter.Types}}}, max(q.GlobalPosition, 1)-1, limit, true, q.Filter.keeps)
		}
	}
	from := q.GlobalPosition
	if !q.Backward {
		from = max(from, 1)
	}
	if q.Filter.empty() {
		return v.readAll(from, limit, q.Backward, nil, nil)
	}
	return v.readAll(from, limit, q.Backward, &q.Filter, nil)
}
