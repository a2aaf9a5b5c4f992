package bench

import (
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"time"
)

// sample is one measured call: when it finished (since the run began) and
// how long it took.
type sample struct{ at, d time.Duration }

// benchSecond is one second of a run: its calls' latency percentiles and
// slowest call, so a stall shows in the second it ended in.
type benchSecond struct {
	Second int     `json:"t"`
	Ops    int     `json:"ops"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
	P999MS float64 `json:"p999_ms"`
	MaxMS  float64 `json:"max_ms"`
	Errors int     `json:"errors"`
}

// timeline buckets samples and error times by the second they finished
// in, from second 0 to the last second that saw anything.
func timeline(samples []sample, errAt []time.Duration) []benchSecond {
	var secs [][]time.Duration
	var errs []int
	grow := func(s int) {
		for len(secs) <= s {
			secs, errs = append(secs, nil), append(errs, 0)
		}
	}
	for _, s := range samples {
		i := int(s.at / time.Second)
		grow(i)
		secs[i] = append(secs[i], s.d)
	}
	for _, at := range errAt {
		i := int(at / time.Second)
		grow(i)
		errs[i]++
	}
	out := make([]benchSecond, len(secs))
	for i, ds := range secs {
		slices.Sort(ds)
		out[i] = benchSecond{Second: i, Ops: len(ds), P50MS: percentileMS(ds, 0.5), P99MS: percentileMS(ds, 0.99),
			P999MS: percentileMS(ds, 0.999), MaxMS: percentileMS(ds, 1), Errors: errs[i]}
	}
	return out
}

// percentileMS is the p-th percentile of sorted durations, in ms.
func percentileMS(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]) / 1e6
}

// writePlot writes a self-contained HTML page with, for each result,
// throughput and p50/p99/p99.9 latency per second as inline SVG.
func writePlot(w io.Writer, results []*Result, targets []string) error {
	var b strings.Builder
	b.WriteString("<!doctype html>\n<meta charset=\"utf-8\">\n<title>skald bench</title>\n")
	b.WriteString("<style>body{font:14px sans-serif;margin:2em}svg{background:#fafafa;border:1px solid #ddd}</style>\n")
	for i, r := range results {
		fmt.Fprintf(&b, "<h2>%s (%s, concurrency %d)</h2>\n<p>%.0f ops/s, %.0f msgs/s, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms, %d errors</p>\n",
			html.EscapeString(r.Workload), html.EscapeString(targets[i]), r.Concurrency, r.OpsPerSec, r.MessagesPerSec,
			r.LatencyMS["p50"], r.LatencyMS["p99"], r.LatencyMS["p999"], r.LatencyMS["max"], r.Errors)
		ops := make([]float64, len(r.Timeline))
		p50 := make([]float64, len(r.Timeline))
		p99 := make([]float64, len(r.Timeline))
		p999 := make([]float64, len(r.Timeline))
		for j, s := range r.Timeline {
			ops[j], p50[j], p99[j], p999[j] = float64(s.Ops), s.P50MS, s.P99MS, s.P999MS
		}
		chart(&b, "ops/s", []series{{"ops/s", "#2a6", ops}})
		chart(&b, "latency ms", []series{{"p50", "#36c", p50}, {"p99", "#c33", p99}, {"p99.9", "#939", p999}})
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type series struct {
	name, color string
	values      []float64 // one per second
}

// chart draws series over seconds on one shared y axis from 0.
func chart(b *strings.Builder, unit string, ss []series) {
	const width, height, pad = 720.0, 180.0, 40.0
	n, top := 0, 0.0
	for _, s := range ss {
		n = max(n, len(s.values))
		for _, v := range s.values {
			top = max(top, v)
		}
	}
	if top == 0 {
		top = 1
	}
	x := func(i int) float64 { return pad + (width-2*pad)*float64(i)/float64(max(n-1, 1)) }
	y := func(v float64) float64 { return height - pad + (2*pad-height)*v/top }
	fmt.Fprintf(b, "<svg width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"%s per second\">\n", width, height, html.EscapeString(unit))
	fmt.Fprintf(b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#999\"/>\n", pad, height-pad, width-pad, height-pad)
	fmt.Fprintf(b, "<text x=\"4\" y=\"%.0f\">%.4g</text><text x=\"4\" y=\"%.0f\">0</text>\n", pad, top, height-pad)
	fmt.Fprintf(b, "<text x=\"%.0f\" y=\"%.0f\">%d s</text>\n", width-pad, height-pad+16, max(n-1, 0))
	for k, s := range ss {
		pts := make([]string, len(s.values))
		for i, v := range s.values {
			pts[i] = fmt.Sprintf("%.1f,%.1f", x(i), y(v))
		}
		fmt.Fprintf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>\n", s.color, strings.Join(pts, " "))
		fmt.Fprintf(b, "<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n", pad+float64(k)*80, 16.0, s.color, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
}
