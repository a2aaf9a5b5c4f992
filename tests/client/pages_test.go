package client_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/rpc"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestReadsReadOnPastPageCap: the server cuts a reply at its page byte
// cap and says so (truncated); the client's reads go on from the last
// message, so a limit of -1 still returns every message and a positive
// limit that many, whatever their size.
//
// The cap is set to 256 KiB here (the default is 3 MiB): with 30
// messages of 256 KiB against the default, each read carried 7.5 MiB,
// and under -race on a loaded machine one 3 MiB page took longer than a
// read attempt (5 s, or half the call's deadline), so the client cut it
// and asked for the same page again until the test's deadline. The
// paging is the same at any cap; each append and read has its own
// deadline.
func TestReadsReadOnPastPageCap(t *testing.T) {
	const pageBytes = 256 << 10
	cl := testcluster.StartWith(t, 1, rpc.Options{Limits: rpc.Limits{PageBytes: pageBytes}})
	c := newTestClient(t, cl.Endpoints(), cl.CreateNamespace(t, "pages", 0))
	const n = 30 // of 32 KiB: 960 KiB, three pages at least
	data := []byte(`{"x":"` + strings.Repeat("a", pageBytes/8) + `"}`)
	for i := range n {
		if _, err := c.Append(ctxT(t), fmt.Sprintf("wide-%d", i%2), []client.NewMessage{{Type: "T", Data: data, Tags: []string{"wide:1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct {
		name     string
		limit    int64
		want     int
		read     func(ctx context.Context, limit int64) ([]client.Message, error)
		backward bool
	}{
		{"ReadAll all", -1, n, func(ctx context.Context, l int64) ([]client.Message, error) { return c.ReadAll(ctx, 0, l) }, false},
		{"ReadAll 20", 20, 20, func(ctx context.Context, l int64) ([]client.Message, error) { return c.ReadAll(ctx, 0, l) }, false},
		{"ReadCategory all", -1, n, func(ctx context.Context, l int64) ([]client.Message, error) {
			return c.ReadCategory(ctx, client.CategoryQuery{Category: "wide", Limit: l})
		}, false},
		{"ReadStream all", -1, n / 2, func(ctx context.Context, l int64) ([]client.Message, error) {
			return c.ReadStream(ctx, client.StreamQuery{Stream: "wide-0", Limit: l})
		}, false},
		{"ReadStream 12", 12, 12, func(ctx context.Context, l int64) ([]client.Message, error) {
			return c.ReadStream(ctx, client.StreamQuery{Stream: "wide-0", Limit: l})
		}, false},
		{"Query all", -1, n, func(ctx context.Context, l int64) ([]client.Message, error) {
			return c.Query(ctx, client.Query{{Tags: []string{"wide:1"}}}, 0, l)
		}, false},
		{"Query default", 0, n, func(ctx context.Context, l int64) ([]client.Message, error) {
			return c.Query(ctx, client.Query{{Tags: []string{"wide:1"}}}, 0, l)
		}, false},
		// Backward reads go on below the last message, and stop at the
		// first (no wrap to the end).
		{"ReadAllBackward all", -1, n, func(ctx context.Context, l int64) ([]client.Message, error) { return c.ReadAllBackward(ctx, -1, l) }, true},
		{"ReadAllBackward 20", 20, 20, func(ctx context.Context, l int64) ([]client.Message, error) { return c.ReadAllBackward(ctx, -1, l) }, true},
		{"ReadCategory backward all", -1, n, func(ctx context.Context, l int64) ([]client.Message, error) {
			return c.ReadCategory(ctx, client.CategoryQuery{Category: "wide", GlobalPosition: -1, Limit: l, Backward: true})
		}, true},
		{"ReadStream backward all", -1, n / 2, func(ctx context.Context, l int64) ([]client.Message, error) {
			return c.ReadStream(ctx, client.StreamQuery{Stream: "wide-0", Position: -1, Limit: l, Backward: true})
		}, true},
		// Filters (types through the type index, stream prefix by scan).
		{"ReadAllQuery type", -1, n, func(ctx context.Context, l int64) ([]client.Message, error) {
			return c.ReadAllQuery(ctx, client.AllQuery{Types: []string{"T"}, Limit: l})
		}, false},
		{"ReadAllQuery prefix", -1, n / 2, func(ctx context.Context, l int64) ([]client.Message, error) {
			return c.ReadAllQuery(ctx, client.AllQuery{StreamPrefix: "wide-1", Limit: l})
		}, false},
		{"ReadCategory after a state vector", -1, n/2 + 5, func(ctx context.Context, l int64) ([]client.Message, error) {
			// wide-0 holds positions 0..14: held up to 9, five follow.
			return c.ReadCategory(ctx, client.CategoryQuery{Category: "wide", StateVector: map[string]int64{"wide-0": 9}, Limit: l})
		}, false},
		{"ReadCategory type and prefix backward", -1, n / 2, func(ctx context.Context, l int64) ([]client.Message, error) {
			return c.ReadCategory(ctx, client.CategoryQuery{Category: "wide", Types: []string{"T"}, StreamPrefix: "wide-0", GlobalPosition: -1, Limit: l, Backward: true})
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

// TestReadsReadOnPastScanBudget: a server whose scan budget is far below
// what a rare filter skips replies with short, even empty, pages and
// resume_from; the client reads on from there, so each read returns
// exactly the matches an unbounded server returns, in order.
func TestReadsReadOnPastScanBudget(t *testing.T) {
	cl := testcluster.StartWith(t, 1, rpc.Options{Limits: rpc.Limits{ScanBudget: 20}})
	ctx := ctxT(t)
	c := newTestClient(t, cl.Endpoints(), cl.CreateNamespace(t, "sparse", 0))
	var rare []int64 // global positions of the rare messages
	for i := range 300 {
		stream, typ, tags := fmt.Sprintf("acct-%d", i%5), "Common", []string{"common"}
		if i%60 == 7 {
			stream, typ, tags = "acct-rare", "Rare", []string{"common", "rare"}
		}
		r, err := c.Append(ctx, stream, []client.NewMessage{{Type: typ, Data: []byte(`{}`), Tags: tags}})
		if err != nil {
			t.Fatal(err)
		}
		if typ == "Rare" {
			rare = append(rare, r.FirstGlobalPosition)
		}
	}
	backward := slices.Clone(rare)
	slices.Reverse(backward)
	for _, r := range []struct {
		name string
		read func(ctx context.Context) ([]client.Message, error)
		want []int64
	}{
		{"ReadCategory types", func(ctx context.Context) ([]client.Message, error) {
			return c.ReadCategory(ctx, client.CategoryQuery{Category: "acct", Types: []string{"Rare"}, Limit: -1})
		}, rare},
		{"ReadCategory prefix backward", func(ctx context.Context) ([]client.Message, error) {
			return c.ReadCategory(ctx, client.CategoryQuery{Category: "acct", StreamPrefix: "acct-r", GlobalPosition: -1, Backward: true, Limit: -1})
		}, backward},
		{"ReadCategory prefix limit 3", func(ctx context.Context) ([]client.Message, error) {
			return c.ReadCategory(ctx, client.CategoryQuery{Category: "acct", StreamPrefix: "acct-r", Limit: 3})
		}, rare[:3]},
		{"ReadAllQuery prefix", func(ctx context.Context) ([]client.Message, error) {
			return c.ReadAllQuery(ctx, client.AllQuery{StreamPrefix: "acct-r", Limit: -1})
		}, rare},
		{"ReadAllQuery prefix backward", func(ctx context.Context) ([]client.Message, error) {
			return c.ReadAllQuery(ctx, client.AllQuery{StreamPrefix: "acct-r", GlobalPosition: -1, Backward: true, Limit: -1})
		}, backward},
		{"Query type and tag", func(ctx context.Context) ([]client.Message, error) {
			return c.Query(ctx, client.Query{{Types: []string{"Rare"}, Tags: []string{"common"}}}, 0, -1)
		}, rare},
		{"Query tag of common", func(ctx context.Context) ([]client.Message, error) {
			return c.Query(ctx, client.Query{{Types: []string{"Common"}, Tags: []string{"rare"}}, {Types: []string{"Rare"}, Tags: []string{"rare"}}}, 0, -1)
		}, rare},
	} {
		t.Run(r.name, func(t *testing.T) {
			msgs, err := r.read(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, m := range msgs {
				got = append(got, m.GlobalPosition)
			}
			if !slices.Equal(got, r.want) {
				t.Fatalf("global positions %v, want %v", got, r.want)
			}
		})
	}
}
