package fsm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// A read with a scan budget stops once it has skipped that many entries,
// and reading on from where ScanStopped says, call after call, returns
// exactly what the unbounded read returns: nothing lost, nothing twice,
// forward and backward, through every filter that skips.
func TestScanBudgetReadsOn(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	for _, ns := range []string{"full", "legacy"} {
		if ns == "full" {
			f.must(createNSAllTypes(ns))
		} else {
			f.must(createNS(ns))
		}
		// 400 messages; the rare ones (type R, tag rare, stream rare-1,
		// correlated) are 1 in 50, so a filtered page skips hundreds.
		for i := range 400 {
			stream, m := fmt.Sprintf("acct-%d", i%7), tagged("A", "common", fmt.Sprintf("odd:%d", i%2))
			if i%50 == 25 {
				stream, m = "acct-rare", withMeta(tagged("R", "common", "rare"), `{"correlationStreamName":"other-1"}`)
			}
			f.must(appendCmd(ns, stream, m))
		}
		f.must(truncateCmd(ns, "acct-3", 40)) // removed messages leave their index entries
	}

	type read struct {
		name string
		run  func(v *View, from int64) ([]Message, error)
		from int64 // the first call's start
		next func(last Message) int64
		// skips: the read examines entries it does not return (else a
		// budget never stops it: a forward read of types through the
		// complete type index merges lists of matches only).
		skips bool
	}
	fwd := func(m Message) int64 { return m.GlobalPosition + 1 }
	bwd := func(m Message) int64 { return m.GlobalPosition - 1 }
	query := func(q Query) func(v *View, from int64) ([]Message, error) {
		return func(v *View, from int64) ([]Message, error) { return v.Query(q, from, 10) }
	}
	reads := []read{
		{"category types", func(v *View, from int64) ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "acct", GlobalPosition: from, Limit: 10, Filter: Filter{Types: []string{"R"}}})
		}, 1, fwd, true},
		{"category prefix backward", func(v *View, from int64) ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "acct", GlobalPosition: from, Limit: 10, Backward: true, Filter: Filter{StreamPrefix: "acct-r"}})
		}, -1, bwd, true},
		{"category correlation", func(v *View, from int64) ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "acct", GlobalPosition: from, Limit: 10, Correlation: "other"})
		}, 1, fwd, true},
		{"category member", func(v *View, from int64) ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "acct", GlobalPosition: from, Limit: 10, Member: 1, Size: 3})
		}, 1, fwd, true},
		{"category state vector", func(v *View, from int64) ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "acct", GlobalPosition: from, Limit: 10, After: map[string]int64{"acct-0": 50, "acct-1": 56, "acct-2": 56, "acct-4": 56, "acct-5": 56, "acct-6": 56}})
		}, 1, fwd, true},
		{"all prefix", func(v *View, from int64) ([]Message, error) {
			return v.ReadAllQuery(AllQuery{GlobalPosition: from, Limit: 10, Filter: Filter{StreamPrefix: "acct-r"}})
		}, 1, fwd, true},
		{"all types backward", func(v *View, from int64) ([]Message, error) {
			return v.ReadAllQuery(AllQuery{GlobalPosition: from, Limit: 10, Backward: true, Filter: Filter{Types: []string{"R"}}})
		}, -1, bwd, true},
		{"all types", func(v *View, from int64) ([]Message, error) {
			return v.ReadAllQuery(AllQuery{GlobalPosition: from, Limit: 10, Filter: Filter{Types: []string{"R"}}})
		}, 1, fwd, false},
		{"query disjoint tags", query(Query{Items: []QueryItem{{Tags: []string{"odd:0", "odd:1"}}}}), 0, func(m Message) int64 { return m.GlobalPosition }, true},
		{"query rare of common", query(Query{Items: []QueryItem{{Tags: []string{"common", "rare"}}, {Types: []string{"R"}, Tags: []string{"odd:0", "odd:1"}}}}), 0, func(m Message) int64 { return m.GlobalPosition }, true},
		{"query removed", query(Query{Items: []QueryItem{{Types: []string{"A"}, Tags: []string{"odd:1"}}}}), 150, func(m Message) int64 { return m.GlobalPosition }, true},
		{"stream min global position", func(v *View, from int64) ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "acct-2", Position: from, GlobalPosition: 300, Limit: 10})
		}, 0, func(m Message) int64 { return m.Position + 1 }, true},
		{"stream min global position backward", func(v *View, from int64) ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "acct-2", Position: from, GlobalPosition: 300, Limit: 10, Backward: true})
		}, -1, func(m Message) int64 { return m.Position - 1 }, true},
	}
	// readOn gathers every page of r with budget (0: none), and how many
	// calls stopped at the budget.
	readOn := func(t *testing.T, ns string, r read, budget int) (gps []int64, stops int) {
		from := r.from
		for calls := 0; ; calls++ {
			if calls > 1000 {
				t.Fatalf("%s: no end after %d calls (at %d)", r.name, calls, from)
			}
			v := view(t, s, ns)
			v.SetScanBudget(budget)
			msgs, err := r.run(v, from)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				gps = append(gps, m.GlobalPosition)
			}
			resume, stopped := v.ScanStopped()
			if stopped != (v.PageCapped() && len(msgs) < 10) {
				t.Fatalf("%s: stopped %v, capped %v with %d messages", r.name, stopped, v.PageCapped(), len(msgs))
			}
			switch {
			case stopped:
				stops++
				from = resume
			case len(msgs) < 10:
				return gps, stops
			default:
				from = r.next(msgs[len(msgs)-1])
			}
			if (r.from < 0 && from < 0) || (r.from < 0 && from == 0 && r.name != "stream min global position backward") {
				return gps, stops // a backward read reached the start
			}
		}
	}
	for _, ns := range []string{"full", "legacy"} {
		for _, r := range reads {
			t.Run(ns+"/"+r.name, func(t *testing.T) {
				want, stops := readOn(t, ns, r, 0)
				if stops != 0 {
					t.Fatalf("stopped %d times with no budget", stops)
				}
				if len(want) == 0 && r.name != "query disjoint tags" {
					t.Fatal("the read returns nothing: the case proves nothing")
				}
				for _, budget := range []int{1, 7, 40} {
					got, stops := readOn(t, ns, r, budget)
					if !slices.Equal(got, want) {
						t.Fatalf("budget %d: read on to %v, want %v", budget, got, want)
					}
					if skips := r.skips || ns == "legacy"; skips && budget < 40 && stops == 0 {
						t.Fatalf("budget %d: never stopped", budget)
					}
				}
			})
		}
	}
}

// A read through a view whose context is done stops within checkEvery
// entries with the context's error instead of scanning on.
func TestReadStopsWithContext(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNSAllTypes("ns"))
	for range 3 * checkEvery {
		f.must(appendCmd("ns", "acct-1", newMsg("A", `{}`)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		run  func(v *View) ([]Message, error)
		want int
	}{
		{"category filter", func(v *View) ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "acct", Limit: -1, Filter: Filter{Types: []string{"none"}}})
		}, 0},
		{"all", func(v *View) ([]Message, error) { return v.ReadAll(1, -1) }, 3 * checkEvery},
		{"stream", func(v *View) ([]Message, error) { return v.ReadStream(StreamQuery{Stream: "acct-1", Limit: -1}) }, 3 * checkEvery},
		{"query", func(v *View) ([]Message, error) {
			return v.Query(Query{Items: []QueryItem{{Types: []string{"A"}}}}, 0, -1)
		}, 3 * checkEvery},
	} {
		v := view(t, s, "ns")
		msgs, err := c.run(v)
		if err != nil || len(msgs) != c.want {
			t.Fatalf("%s without a context: %d messages, %v", c.name, len(msgs), err)
		}
		v.SetContext(ctx)
		msgs, err = c.run(v)
		if !errors.Is(err, context.Canceled) || msgs != nil {
			t.Fatalf("%s with a cancelled context: %d messages, err %v; want context.Canceled", c.name, len(msgs), err)
		}
	}
}
