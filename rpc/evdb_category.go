package rpc

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/skalddb/skald/fsm"
)

// EventoDB's category.get and its consumer groups.

func (e *evdb) categoryGet(ctx context.Context, args evArgs) (any, *evError) {
	category, everr := args.str(0, "categoryName")
	if everr != nil {
		return nil, everr
	}
	opts, everr := args.opts(1)
	if everr != nil {
		return nil, everr
	}
	pos, hasPos, everr := opts.num("position")
	if everr != nil {
		return nil, everr
	}
	if gp, hasGP, err := opts.num("globalPosition"); err != nil {
		return nil, err
	} else if hasGP && !hasPos {
		pos = gp // the documented alias
	}
	limit, everr := opts.batchSize()
	if everr != nil {
		return nil, everr
	}
	correlation, _, everr := opts.str("correlation")
	if everr != nil {
		return nil, everr
	}
	member, size, everr := evConsumerGroup(opts)
	if everr != nil {
		return nil, everr
	}
	after, everr := evStateVector(opts, category)
	if everr != nil {
		return nil, everr
	}
	if strings.Contains(category, "-") {
		return []any{}, nil // a stream name, not a category: matches nothing
	}
	read := func(v *fsm.View, from int64, limit int) ([]fsm.Message, error) {
		return v.ReadCategory(fsm.CategoryQuery{Category: category, GlobalPosition: from, Limit: limit,
			Correlation: correlation, Member: member, Size: size, After: after})
	}
	return e.readPages(ctx, &evPages{from: max(pos, 1), read: read, format: categoryFormat,
		next: func(m *fsm.Message) int64 { return m.GlobalPosition + 1 }}, limit)
}

// evStateVector reads the Skald extension stateVector: {"stream": position,
// ...}, the highest position the caller holds per stream of the category
// (fsm/statevector.go). Absent: nil. EventoDB's SDKs never send it.
func evStateVector(opts evOpts, category string) (map[string]int64, *evError) {
	raw, ok := opts["stateVector"]
	if !ok {
		return nil, nil
	}
	var sv map[string]json.Number
	if isNull(raw) || json.Unmarshal(raw, &sv) != nil {
		return nil, evInvalid("stateVector must be an object {streamName: position}")
	}
	out := make(map[string]int64, len(sv))
	for stream, n := range sv {
		pos, err := n.Int64()
		if err != nil {
			return nil, evInvalid("stateVector[%q] must be an integer, got %s", stream, n)
		}
		out[stream] = pos
	}
	if err := fsm.ValidateStateVector("stateVector", category, out); err != nil {
		return nil, evRefused("", err)
	}
	return out, nil
}

// evConsumerGroup reads {"member": int, "size": int}: both required, size
// above 0, 0 <= member < size.
func evConsumerGroup(opts evOpts) (member, size int64, err *evError) {
	raw, ok := opts["consumerGroup"]
	if !ok {
		return 0, 0, nil
	}
	var g map[string]json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &g) != nil {
		return 0, 0, evInvalid("consumerGroup must be an object {member, size}")
	}
	m, hasM, err := evOpts(g).num("member")
	if err != nil {
		return 0, 0, evInvalid("consumerGroup.member must be a number")
	}
	s, hasS, err := evOpts(g).num("size")
	if err != nil {
		return 0, 0, evInvalid("consumerGroup.size must be a number")
	}
	switch {
	case !hasM || !hasS:
		return 0, 0, evInvalid("consumerGroup needs both member and size")
	case s < 1:
		return 0, 0, evInvalid("consumerGroup.size must be at least 1, got %d", s)
	case m < 0 || m >= s:
		return 0, 0, evInvalid("consumerGroup.member must be 0..%d, got %d", s-1, m)
	}
	return m, s, nil
}
