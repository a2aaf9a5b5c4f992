package bench

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestTimeline(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name    string
		samples []sample
		errAt   []time.Duration
		want    []benchSecond
	}{
		{"empty", nil, nil, []benchSecond{}},
		{"one second", []sample{{100 * ms, 2 * ms}, {900 * ms, 4 * ms}}, nil,
			[]benchSecond{{Second: 0, Ops: 2, P50MS: 4, P99MS: 4, P999MS: 4, MaxMS: 4}}},
		{"a quiet second in between", []sample{{500 * ms, 1 * ms}, {2500 * ms, 3 * ms}}, []time.Duration{1500 * ms},
			[]benchSecond{{Second: 0, Ops: 1, P50MS: 1, P99MS: 1, P999MS: 1, MaxMS: 1}, {Second: 1, Errors: 1}, {Second: 2, Ops: 1, P50MS: 3, P99MS: 3, P999MS: 3, MaxMS: 3}}},
		{"percentiles per second", func() []sample {
			var s []sample
			for i := 1; i <= 100; i++ {
				s = append(s, sample{time.Second + time.Duration(i)*ms, time.Duration(i) * ms})
			}
			return s
		}(), nil, []benchSecond{{Second: 0}, {Second: 1, Ops: 100, P50MS: 51, P99MS: 100, P999MS: 100, MaxMS: 100}}},
		{"p99.9 and max apart from p99", func() []sample {
			// 2,000 calls of 1-2,000 ms in one second: p99 is the 1,981st,
			// p99.9 the 1,999th, max the 2,000th.
			var s []sample
			for i := 1; i <= 2000; i++ {
				s = append(s, sample{500 * ms, time.Duration(i) * ms})
			}
			return s
		}(), nil, []benchSecond{{Second: 0, Ops: 2000, P50MS: 1001, P99MS: 1981, P999MS: 1999, MaxMS: 2000}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := timeline(tc.samples, tc.errAt); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("timeline = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestWritePlot(t *testing.T) {
	res := &Result{Workload: "append<x>", Concurrency: 4, OpsPerSec: 10, LatencyMS: map[string]float64{"p50": 1, "p99": 2, "p999": 7.5, "max": 9},
		Timeline: []benchSecond{{0, 10, 1, 2, 2.5, 3, 0}, {1, 20, 1.5, 3, 4, 9, 1}, {2, 15, 1, 2, 2, 2, 0}}}
	var b strings.Builder
	if err := writePlot(&b, []*Result{res}, []string{"all"}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<h2>append&lt;x&gt; (all, concurrency 4)</h2>", `aria-label="ops/s per second"`, `aria-label="latency ms per second"`, ">p99</text>", ">p99.9</text>",
		"p99 2.00 ms, p99.9 7.50 ms, max 9.00 ms"} {
		if !strings.Contains(page, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
	if n := strings.Count(page, "<polyline"); n != 4 {
		t.Fatalf("%d polylines, want 4 (ops, p50, p99, p99.9)", n)
	}
	// Three points per line, the busiest second at the top of the ops chart.
	if !strings.Contains(page, `points="40.0,90.0 360.0,40.0 680.0,65.0"`) {
		t.Fatalf("ops line not where expected:\n%s", page)
	}
}

func TestSlowest(t *testing.T) {
	ms := time.Millisecond
	start := time.Date(2026, 11, 26, 7, 26, 43, 0, time.UTC)
	// Caller 0's second call took 2.1 s and ended 2.5 s in: sent at 0.4 s.
	lat := [][]sample{
		{{100 * ms, 90 * ms}, {2500 * ms, 2100 * ms}},
		{{300 * ms, 250 * ms}},
		{{200 * ms, 5 * ms}, {900 * ms, 700 * ms}},
	}
	node := func(i int) string { return []string{"a", "b", "c"}[i%3] }
	cases := []struct {
		name string
		n    int
		want []slowCall
	}{
		{"the two slowest", 2, []slowCall{{"07:26:43.400", 2100, 0, "a"}, {"07:26:43.200", 700, 2, "c"}}},
		{"more than there are", 10, []slowCall{{"07:26:43.400", 2100, 0, "a"}, {"07:26:43.200", 700, 2, "c"},
			{"07:26:43.050", 250, 1, "b"}, {"07:26:43.010", 90, 0, "a"}, {"07:26:43.195", 5, 2, "c"}}},
		{"none asked", 0, []slowCall{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := slowest(start, lat, node, tc.n); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("slowest = %+v, want %+v", got, tc.want)
			}
		})
	}
}
