package evdb

import (
	"encoding/json"
	"testing"

	"github.com/skalddb/skald/fsm"
)

// TestMessageShapes pins the arrays the read methods answer with: data
// as stored, absent metadata as null, the time in UTC without trailing
// zeros.
func TestMessageShapes(t *testing.T) {
	m := &fsm.Message{ID: "i", Stream: "a-1", Type: "T", Position: 2, GlobalPosition: 9, Data: []byte(`{"x":1}`),
		Time: 1736935200120000000}
	for _, c := range []struct {
		got  []any
		want string
	}{
		{StreamMessage(m), `["i","T",2,9,{"x":1},null,"2025-01-15T10:00:00.12Z"]`},
		{CategoryMessage(m), `["i","a-1","T",2,9,{"x":1},null,"2025-01-15T10:00:00.12Z"]`},
	} {
		b, err := json.Marshal(c.got)
		if err != nil || string(b) != c.want {
			t.Errorf("got %s, %v; want %s", b, err, c.want)
		}
	}
	if got := RFC3339Seconds(1736935200120000000); got != "2025-01-15T10:00:00Z" {
		t.Errorf("RFC3339Seconds: %s", got)
	}
}
