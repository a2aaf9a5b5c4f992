// Package report owns what a chaos run leaves on disk besides the
// history: results.json, summary.txt and latency.html. It only formats;
// verdicts come from the checker.
package report

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skalddb/skald/jepsen/internal/checker"
	"github.com/skalddb/skald/jepsen/internal/history"
)

// Run is the run's identity as the report shows it.
type Run struct {
	Dir      string            `json:"dir"`
	Seed     uint64            `json:"seed"`
	Workload string            `json:"workload"`
	Nemesis  string            `json:"nemesis"`
	Nodes    int               `json:"nodes"`
	Net      string            `json:"net"`
	Mutant   string            `json:"mutant,omitempty"`
	Skipped  map[string]string `json:"skipped_faults,omitempty"`
	Errors   []string          `json:"harness_errors,omitempty"`
}

// Results is results.json.
type Results struct {
	Run
	checker.Result
}

// Write writes results.json, summary.txt and latency.html into dir.
func Write(dir string, run Run, res checker.Result, ops []history.Op) error {
	b, err := json.MarshalIndent(Results{run, res}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(Summary(run, res)), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "latency.html"))
	if err != nil {
		return err
	}
	defer f.Close()
	return Plot(f, run, ops)
}

// Summary is the human-readable verdict.
func Summary(run Run, res checker.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "valid: %v\n", res.Valid)
	fmt.Fprintf(&b, "run: workload=%s nemesis=%s nodes=%d net=%s seed=%d", run.Workload, run.Nemesis, run.Nodes, run.Net, run.Seed)
	if run.Mutant != "" {
		fmt.Fprintf(&b, " mutant=%s", run.Mutant)
	}
	fmt.Fprintf(&b, "\ndir: %s\n", run.Dir)
	for f, why := range run.Skipped {
		fmt.Fprintf(&b, "skipped fault %s: %s\n", f, why)
	}
	for _, e := range run.Errors {
		fmt.Fprintf(&b, "harness error: %s\n", e)
	}
	st := res.Stats
	fmt.Fprintf(&b, "ops: %d in %.1fs, %.1f ok/s (%.1f ok/s during faults); final log %d events in %d streams; indeterminate appends: %d applied, %d not\n",
		st.Ops, st.DurationSec, st.OKPerSec, st.FaultOKPerSec, st.FinalEvents, st.Streams, st.Recovered, st.LostUnacked)
	if st.Retried > 0 || st.DuplicateAcks > 0 {
		fmt.Fprintf(&b, "appends sent more than once (retried or hedged): %d; attempts acknowledged as duplicates: %d\n", st.Retried, st.DuplicateAcks)
	}
	for _, f := range slices.Sorted(maps.Keys(st.ByF)) {
		c := st.ByF[f]
		fmt.Fprintf(&b, "  %-14s ok %6d  fail %6d  info %6d\n", f, c[history.OK], c[history.Fail], c[history.Info])
	}
	fmt.Fprintf(&b, "linearizability: %s (%d ops in %d streams, %d patched, %d ms)\n", res.Linear.Result, res.Linear.Ops, res.Linear.Streams, res.Linear.Patched, res.Linear.DurationMS)
	for _, n := range slices.Sorted(maps.Keys(res.Checkers)) {
		fmt.Fprintf(&b, "  checker %-16s %s\n", n, res.Checkers[n])
	}
	for _, u := range res.Unknown {
		fmt.Fprintf(&b, "unknown: %s\n", u)
	}
	for _, k := range slices.Sorted(maps.Keys(res.Anomalies)) {
		fmt.Fprintf(&b, "ANOMALY %s: %d\n", k, res.Anomalies[k])
	}
	for _, e := range res.Examples {
		fmt.Fprintf(&b, "  %s: %s\n", e.Kind, e.Msg)
	}
	return b.String()
}
