package report

import (
	"fmt"
	"html"
	"io"
	"math"

	"github.com/skalddb/skald/jepsen/internal/history"
)

// Plot writes an HTML page with two inline SVG charts: every operation's
// latency over time (log scale, colored by outcome) and ok operations per
// second, both with the nemesis windows shaded.
func Plot(w io.Writer, run Run, ops []history.Op) error {
	pairs, err := history.Pairs(ops)
	if err != nil {
		return err
	}
	windows := history.Windows(ops)
	var end int64 = 1
	for _, p := range pairs {
		if p.Return() != math.MaxInt64 && p.Return() > end {
			end = p.Return()
		}
	}
	const (
		width, height = 1000.0, 300.0
		left, bottom  = 60.0, 30.0
	)
	x := func(t int64) float64 { return left + (width-left-10)*float64(t)/float64(end) }
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>%s</title><body style=\"font-family:sans-serif\">\n", html.EscapeString(run.Dir))
	fmt.Fprintf(w, "<h3>%s — workload %s, nemesis %s, %d nodes, seed %d</h3>\n", html.EscapeString(run.Dir), run.Workload, run.Nemesis, run.Nodes, run.Seed)
	shade := func() {
		for _, win := range windows {
			e := min(win.End, end)
			fmt.Fprintf(w, "<rect x=%.1f y=0 width=%.1f height=%.1f fill=\"#f4c7c3\" opacity=0.5><title>%s %s</title></rect>\n",
				x(win.Start), max(x(e)-x(win.Start), 1), height-bottom, html.EscapeString(win.Fault), html.EscapeString(win.What))
		}
	}
	axis := func(label string) {
		fmt.Fprintf(w, "<line x1=%.0f y1=%.0f x2=%.0f y2=%.0f stroke=black />\n", left, height-bottom, width-10, height-bottom)
		for s := int64(0); s <= end/1e9; s += max(1, end/1e9/10) {
			fmt.Fprintf(w, "<text x=%.1f y=%.0f font-size=10 text-anchor=middle>%ds</text>\n", x(s*1e9), height-bottom+14, s)
		}
		fmt.Fprintf(w, "<text x=5 y=12 font-size=11>%s</text>\n", label)
	}

	// Latency, log scale 100 µs .. 10 s.
	fmt.Fprintf(w, "<svg width=%.0f height=%.0f style=\"border:1px solid #ccc\">\n", width, height)
	shade()
	lo, hi := math.Log10(1e5), math.Log10(1e10)
	y := func(ns int64) float64 {
		v := math.Log10(max(float64(ns), 1e5))
		return (height - bottom) * (1 - (min(v, hi)-lo)/(hi-lo))
	}
	for _, d := range []int64{1e6, 1e7, 1e8, 1e9} {
		fmt.Fprintf(w, "<text x=5 y=%.1f font-size=10>%s</text><line x1=%.0f x2=%.0f y1=%.1f y2=%.1f stroke=\"#eee\" />\n", y(d)+3, fmtDur(d), left, width-10, y(d), y(d))
	}
	colors := map[history.Type]string{history.OK: "#2b7bba", history.Fail: "#d62728", history.Info: "#ff9f1c"}
	for _, p := range pairs {
		ret := p.Return()
		if ret == math.MaxInt64 {
			ret = end
		}
		fmt.Fprintf(w, "<circle cx=%.1f cy=%.1f r=1.5 fill=\"%s\" />\n", x(p.Call()), y(ret-p.Call()), colors[p.Type()])
	}
	axis("latency (log) — blue ok, red fail, orange indeterminate; shaded: faults")
	fmt.Fprintln(w, "</svg><br>")

	// Throughput per second.
	secs := int(end/1e9) + 1
	okPer := make([]int, secs)
	for _, p := range pairs {
		if p.Type() == history.OK {
			okPer[min(int(p.Return()/1e9), secs-1)]++
		}
	}
	peak := 1
	for _, v := range okPer {
		peak = max(peak, v)
	}
	fmt.Fprintf(w, "<svg width=%.0f height=%.0f style=\"border:1px solid #ccc\">\n", width, height)
	shade()
	fmt.Fprint(w, "<polyline fill=none stroke=\"#2b7bba\" points=\"")
	for s, v := range okPer {
		fmt.Fprintf(w, "%.1f,%.1f ", x(int64(s)*1e9+5e8), (height-bottom)*(1-float64(v)/float64(peak)))
	}
	fmt.Fprintln(w, "\" />")
	axis(fmt.Sprintf("ok operations per second (peak %d)", peak))
	fmt.Fprintln(w, "</svg></body>")
	return nil
}

func fmtDur(ns int64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%ds", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%dms", ns/1e6)
	}
	return fmt.Sprintf("%dµs", ns/1e3)
}
