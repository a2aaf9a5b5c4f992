package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// side is one system's row in the comparison.
type side struct {
	name string // "etcd", "NATS", "Skald"
	op   string // what one operation is, e.g. "put"
	r    result
}

// target is a goal from issue 15 for one Skald/other ratio; 0 means none.
type target struct{ throughputMin, cpuMax, p99Max float64 }

// compare prints etcd, NATS and one to three Skald runs: the Connect
// append (unary), then optionally the EventoDB /rpc stream.write and the
// Go client's appends over AppendStream.
func compare(args []string) error {
	if len(args) < 3 || len(args) > 5 {
		return errors.New("usage: compare ETCD.json NATS.json SKALD.json [SKALD-EVENTODB.json [SKALD-APPENDSTREAM.json]]")
	}
	rs := make([]result, len(args))
	for i, path := range args {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &rs[i]); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	skalds := []side{{"Skald", "Connect append", rs[2]}}
	if len(rs) >= 4 {
		skalds = append(skalds, side{"Skald", "EventoDB stream.write", rs[3]})
	}
	if len(rs) == 5 {
		skalds = append(skalds, side{"Skald", "Connect AppendStream", rs[4]})
	}
	printComparison(os.Stdout, side{"etcd", "put", rs[0]}, side{"NATS", "JetStream publish", rs[1]}, skalds,
		map[string]target{"etcd": {throughputMin: 2, cpuMax: 0.5, p99Max: 1}, "NATS": {cpuMax: 1}})
	return nil
}

// printComparison prints one row per side, how CPU was measured, and
// each Skald side against each other one (throughput, CPU per op, p99 and
// p99.9), each ratio saying which side it favours.
func printComparison(w io.Writer, etcd, nats side, skalds []side, targets map[string]target) {
	fmt.Fprintf(w, "%-32s %9s %8s %8s %8s %9s %8s %6s %10s %12s\n", "3 nodes each, same machine",
		"ops/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "errors", "cpu µs/op", "(/metrics)")
	for _, s := range append([]side{etcd, nats}, skalds...) {
		l := s.r.LatencyMS
		fmt.Fprintf(w, "%-32s %9.0f %8.2f %8.2f %8.2f %9.2f %8.2f %6d %10s %12s\n",
			fmt.Sprintf("%s %s x%d", s.name, s.op, s.r.Concurrency), s.r.OpsPerSec,
			l["p50"], l["p90"], l["p99"], l["p999"], l["max"], s.r.Errors,
			orNA(s.r.ServerCPUProcUsPerOp), orNA(s.r.ServerCPUUsPerOp))
	}
	fmt.Fprintf(w, "cpu µs/op: server CPU per operation over all 3 nodes: %s.\n", procCPUMethod)
	fmt.Fprintln(w, "(/metrics): the same from the servers' own process_cpu_seconds_total, as a cross-check (NATS has none).")
	for _, skald := range skalds {
		for _, o := range []side{etcd, nats} {
			fmt.Fprintf(w, "Skald %s vs %s: %s; %s; %s; %s\n", skald.op, o.name,
				ratio("throughput", skald.r.OpsPerSec, o.r.OpsPerSec, true, o.name, targets[o.name].throughputMin),
				ratio("CPU per op", skald.r.ServerCPUProcUsPerOp, o.r.ServerCPUProcUsPerOp, false, o.name, targets[o.name].cpuMax),
				ratio("p99", skald.r.LatencyMS["p99"], o.r.LatencyMS["p99"], false, o.name, targets[o.name].p99Max),
				ratio("p99.9", skald.r.LatencyMS["p999"], o.r.LatencyMS["p999"], false, o.name, 0))
		}
	}
}

// ratio says "CPU per op 1.32x etcd's (etcd better; target <= 0.5x)": Skald's
// figure over the other side's, and which side that favours. higherBetter is
// true for throughput, false for CPU and latency. goal 0 means no target.
func ratio(what string, skald, other float64, higherBetter bool, name string, goal float64) string {
	if skald <= 0 || other <= 0 {
		return what + " n/a"
	}
	r := math.Round(skald/other*100) / 100 // judged as printed: 1.00x is even, and meets <= 1x
	winner := "even"
	if r != 1 {
		if (r > 1) == higherBetter {
			winner = "Skald better"
		} else {
			winner = name + " better"
		}
	}
	s := fmt.Sprintf("%s %.2fx %s's (%s", what, r, name, winner)
	if goal > 0 {
		cmp, met := "<=", r <= goal
		if higherBetter {
			cmp, met = ">=", r >= goal
		}
		verdict := "missed"
		if met {
			verdict = "met"
		}
		s += fmt.Sprintf("; target %s %gx %s", cmp, goal, verdict)
	}
	return s + ")"
}

func orNA(v float64) string {
	if v <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", v)
}
