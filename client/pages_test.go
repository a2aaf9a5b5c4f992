package client

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/skalddb/skald/internal/testcluster"
)

// TestReadsReadOnPastPageCap: the server cuts a reply at its page byte
// cap (3 MiB) and says so (truncated); the client's reads go on from the
// last message, so a limit of -1 still returns every message and a
// positive limit that many, whatever their size.
func TestReadsReadOnPastPageCap(t *testing.T) {
	cl := testcluster.Start(t, 1)
	ctx := ctxT(t)
	c := newTestClient(t, cl.Endpoints(), cl.CreateNamespace(t, "pages", 0))
	const n = 30 // of 256 KiB: 7.5 MiB, three pages at least
	data := []byte(`{"x":"` + strings.Repeat("a", 256<<10) + `"}`)
	for i := range n {
		if _, err := c.Append(ctx, fmt.Sprintf("wide-%d", i%2), []NewMessage{{Type: "T", Data: data, Tags: []string{"wide:1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct {
		name     string
		limit    int64
		want     int
		read     func(ctx context.Context, limit int64) ([]Message, error)
		backward bool
	}{
		{"ReadAll all", -1, n, func(ctx context.Context, l int64) ([]Message, error) { return c.ReadAll(ctx, 0, l) }, false},
		{"ReadAll 20", 20, 20, func(ctx context.Context, l int64) ([]Message, error) { return c.ReadAll(ctx, 0, l) }, false},
		{"ReadCategory all", -1, n, func(ctx context.Context, l int64) ([]Message, error) {
			return c.ReadCategory(ctx, CategoryQuery{Category: "wide", Limit: l})
		}, false},
		{"ReadStream all", -1, n / 2, func(ctx context.Context, l int64) ([]Message, error) {
			return c.ReadStream(ctx, StreamQuery{Stream: "wide-0", Limit: l})
		}, false},
		{"ReadStream 12", 12, 12, func(ctx context.Context, l int64) ([]Message, error) {
			return c.ReadStream(ctx, StreamQuery{Stream: "wide-0", Limit: l})
		}, false},
		{"Query all", -1, n, func(ctx context.Context, l int64) ([]Message, error) {
			return c.Query(ctx, Query{{Tags: []string{"wide:1"}}}, 0, l)
		}, false},
		{"Query default", 0, n, func(ctx context.Context, l int64) ([]Message, error) {
			return c.Query(ctx, Query{{Tags: []string{"wide:1"}}}, 0, l)
		}, false},
		// Backward reads go on below the last message, and stop at the
		// first (no wrap to the end).
		{"ReadAllBackward all", -1, n, func(ctx context.Context, l int64) ([]Message, error) { return c.ReadAllBackward(ctx, -1, l) }, true},
		{"ReadAllBackward 20", 20, 20, func(ctx context.Context, l int64) ([]Message, error) { return c.ReadAllBackward(ctx, -1, l) }, true},
		{"ReadCategory backward all", -1, n, func(ctx context.Context, l int64) ([]Message, error) {
			return c.ReadCategory(ctx, CategoryQuery{Category: "wide", GlobalPosition: -1, Limit: l, Backward: true})
		}, true},
		{"ReadStream backward all", -1, n / 2, func(ctx context.Context, l int64) ([]Message, error) {
			return c.ReadStream(ctx, StreamQuery{Stream: "wide-0", Position: -1, Limit: l, Backward: true})
		}, true},
		// Filters (types through the type index, stream prefix by scan).
		{"ReadAllQuery type", -1, n, func(ctx context.Context, l int64) ([]Message, error) {
			return c.ReadAllQuery(ctx, AllQuery{Types: []string{"T"}, Limit: l})
		}, false},
		{"ReadAllQuery prefix", -1, n / 2, func(ctx context.Context, l int64) ([]Message, error) {
			return c.ReadAllQuery(ctx, AllQuery{StreamPrefix: "wide-1", Limit: l})
		}, false},
		{"ReadCategory after a state vector", -1, n/2 + 5, func(ctx context.Context, l int64) ([]Message, error) {
			// wide-0 holds positions 0..14: held up to 9, five follow.
			return c.ReadCategory(ctx, CategoryQuery{Category: "wide", StateVector: map[string]int64{"wide-0": 9}, Limit: l})
		}, false},
		{"ReadCategory type and prefix backward", -1, n / 2, func(ctx context.Context, l int64) ([]Message, error) {
			return c.ReadCategory(ctx, CategoryQuery{Category: "wide", Types: []string{"T"}, StreamPrefix: "wide-0", GlobalPosition: -1, Limit: l, Backward: true})
		}, true},
	} {
		t.Run(r.name, func(t *testing.T) {
			msgs, err := r.read(ctxT(t), r.limit) // each its own deadline, under -race on a busy machine
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != r.want {
				t.Fatalf("%d messages, want %d", len(msgs), r.want)
			}
			for i := 1; i < len(msgs); i++ {
				if r.backward {
					if msgs[i].GlobalPosition >= msgs[i-1].GlobalPosition {
						t.Fatalf("backward: message %d at global position %d after %d", i, msgs[i].GlobalPosition, msgs[i-1].GlobalPosition)
					}
					continue
				}
				if msgs[i].GlobalPosition <= msgs[i-1].GlobalPosition {
					t.Fatalf("message %d at global position %d after %d", i, msgs[i].GlobalPosition, msgs[i-1].GlobalPosition)
				}
			}
		})
	}
}
