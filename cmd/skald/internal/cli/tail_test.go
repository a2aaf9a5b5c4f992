package cli

import (
	"context"
	"errors"
	"math/bits"
	"sort"
	"testing"
)

// TestLastGlobalPosition runs the gallop-and-halve search over namespaces
// of known positions: it must find the last one (0 for none) and pass on
// the first error.
func TestLastGlobalPosition(t *testing.T) {
	span := func(from, to int64) []int64 {
		var s []int64
		for p := from; p <= to; p++ {
			s = append(s, p)
		}
		return s
	}
	cases := []struct {
		name string
		gps  []int64
		want int64
	}{
		{"empty", nil, 0},
		{"one at 1", []int64{1}, 1},
		{"one far", []int64{1_000_003}, 1_000_003},
		{"contiguous", span(1, 1000), 1000},
		{"power of two", span(1, 1024), 1024},
		{"gaps", []int64{3, 4, 90, 91, 5000, 70000}, 70000},
		{"deleted front", span(500, 777), 777},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			first := func(_ context.Context, gp int64) (int64, bool, error) {
				calls++
				i := sort.Search(len(c.gps), func(i int) bool { return c.gps[i] >= gp })
				if i == len(c.gps) {
					return 0, false, nil
				}
				return c.gps[i], true, nil
			}
			got, err := lastGlobalPosition(context.Background(), first)
			if err != nil || got != c.want {
				t.Fatalf("lastGlobalPosition = %d, %v; want %d", got, err, c.want)
			}
			if max := 2*bits.Len64(uint64(c.want)) + 4; calls > max {
				t.Fatalf("%d calls of first: the search is not logarithmic (at most %d)", calls, max)
			}
		})
	}
	boom := errors.New("boom")
	for _, after := range []int{0, 1, 5, 12} {
		calls := 0
		first := func(_ context.Context, gp int64) (int64, bool, error) {
			if calls == after {
				return 0, false, boom
			}
			calls++
			if gp > 1<<20 {
				return 0, false, nil
			}
			return gp, true, nil
		}
		if got, err := lastGlobalPosition(context.Background(), first); !errors.Is(err, boom) || got != 0 {
			t.Fatalf("error at call %d: got %d, %v; want 0, boom", after, got, err)
		}
	}
}
