package rpc

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/rpc/evdb"
)

// EventoDB's category.get and its consumer groups.

func (e *eventodb) categoryGet(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	category, everr := args.Str(0, "categoryName")
	if everr != nil {
		return nil, everr
	}
	opts, everr := args.Opts(1)
	if everr != nil {
		return nil, everr
	}
	pos, hasPos, everr := opts.Num("position")
	if everr != nil {
		return nil, everr
	}
	if gp, hasGP, err := opts.Num("globalPosition"); err != nil {
		return nil, err
	} else if hasGP && !hasPos {
		pos = gp // the documented alias
	}
	limit, everr := opts.BatchSize()
	if everr != nil {
		return nil, everr
	}
	correlation, _, everr := opts.Str("correlation")
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
	return e.readPages(ctx, &evPages{from: max(pos, 1), read: read, format: evdb.CategoryMessage,
		next: func(m *fsm.Message) int64 { return m.GlobalPosition + 1 }}, limit)
}

// evStateVector reads the Skald extension stateVector: {"stream": position,
// ...}, the highest position the caller holds per stream of the category
// (fsm/statevector.go). Absent: nil. EventoDB's SDKs never send it.
func evStateVector(opts evdb.Opts, category string) (map[string]int64, *evdb.Error) {
	raw, ok := opts["stateVector"]
	if !ok {
		return nil, nil
	}
	var sv map[string]json.Number
	if evdb.IsNull(raw) || json.Unmarshal(raw, &sv) != nil {
		return nil, evdb.Invalid("stateVector must be an object {streamName: position}")
	}
	out := make(map[string]int64, len(sv))
	for stream, n := range sv {
		pos, err := n.Int64()
		if err != nil {
			return nil, evdb.Invalid("stateVector[%q] must be an integer, got %s", stream, n)
		}
		out[stream] = pos
	}
	if err := fsm.ValidateStateVector("stateVector", category, out); err != nil {
		return nil, evdb.Refused("", err)
	}
	return out, nil
}

// evConsumerGroup reads {"member": int, "size": int}: both required, size
// above 0, 0 <= member < size.
func evConsumerGroup(opts evdb.Opts) (member, size int64, err *evdb.Error) {
	raw, ok := opts["consumerGroup"]
	if !ok {
		return 0, 0, nil
	}
	var g map[string]json.RawMessage
	if evdb.IsNull(raw) || json.Unmarshal(raw, &g) != nil {
		return 0, 0, evdb.Invalid("consumerGroup must be an object {member, size}")
	}
	m, hasM, err := evdb.Opts(g).Num("member")
	if err != nil {
		return 0, 0, evdb.Invalid("consumerGroup.member must be a number")
	}
	s, hasS, err := evdb.Opts(g).Num("size")
	if err != nil {
		return 0, 0, evdb.Invalid("consumerGroup.size must be a number")
	}
	switch {
	case !hasM || !hasS:
		return 0, 0, evdb.Invalid("consumerGroup needs both member and size")
	case s < 1:
		return 0, 0, evdb.Invalid("consumerGroup.size must be at least 1, got %d", s)
	case m < 0 || m >= s:
		return 0, 0, evdb.Invalid("consumerGroup.member must be 0..%d, got %d", s-1, m)
	}
	return m, s, nil
}
