package evdb

import (
	"encoding/json"
	"time"

	"github.com/skalddb/skald/fsm"
)

// StreamMessage is a message as the stream methods answer it:
// [id, type, position, globalPosition, data, metadata, time].
func StreamMessage(m *fsm.Message) []any {
	return []any{m.ID, m.Type, m.Position, m.GlobalPosition, json.RawMessage(m.Data), rawOrNull(m.Metadata),
		RFC3339(m.Time)}
}

// CategoryMessage is a message as category.get answers it:
// [id, streamName, type, position, globalPosition, data, metadata, time].
func CategoryMessage(m *fsm.Message) []any {
	return []any{m.ID, m.Stream, m.Type, m.Position, m.GlobalPosition, json.RawMessage(m.Data),
		rawOrNull(m.Metadata), RFC3339(m.Time)}
}

func rawOrNull(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// RFC3339 renders a time as EventoDB does: UTC, up to 9 fractional digits
// with trailing zeros dropped.
func RFC3339(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// RFC3339Seconds renders a time in UTC to the second.
func RFC3339Seconds(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339) }
