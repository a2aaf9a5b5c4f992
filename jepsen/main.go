// Command jepsen is Skald's chaos and consistency harness: it runs a real
// cluster of `skald server` processes, drives a recorded workload while a
// nemesis kills, pauses, partitions and moves leadership, heals, reads the
// final log from every node and checks the history (README.md).
//
//	go run ./jepsen -workload mixed -nemesis all -nodes 5 -time 5m
//	go run ./jepsen check store/latest
//	go run ./jepsen clean
//
// Exit codes: 0 valid, 1 invalid, 2 unknown, 3 harness error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/skalddb/skald/jepsen/internal/checker"
	"github.com/skalddb/skald/jepsen/internal/cluster"
	"github.com/skalddb/skald/jepsen/internal/history"
	"github.com/skalddb/skald/jepsen/internal/report"
	"github.com/skalddb/skald/jepsen/internal/runner"
	"github.com/skalddb/skald/jepsen/internal/workload"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return runCheck(args[1:], stdout, stderr)
		case "clean":
			for _, n := range cluster.CleanNetns() {
				fmt.Fprintf(stdout, "removed %s\n", n)
			}
			return 0
		}
	}
	o, count, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "jepsen:", err)
		return runner.ExitHarness
	}
	if o.Bin == "" {
		if o.Bin, err = buildSkald(ctx, filepath.Join(o.Out, "bin"), o.Mutant != "", stderr); err != nil {
			fmt.Fprintln(stderr, "jepsen: build skald:", err)
			return runner.ExitHarness
		}
	}
	worst := runner.ExitValid
	var lines []string
	defer func() {
		if len(lines) > 1 {
			fmt.Fprintf(stdout, "\njepsen: %d runs\n%s\n", len(lines), strings.Join(lines, "\n"))
		}
	}()
	for i := range count {
		if i > 0 {
			o.Seed++
		}
		fmt.Fprintf(stdout, "jepsen: seed %d\n", o.Seed)
		out, err := runner.Run(ctx, o)
		if out.Dir != "" {
			fmt.Fprintf(stdout, "jepsen: output %s\n", out.Dir)
		}
		if err != nil {
			fmt.Fprintln(stderr, "jepsen: harness error:", err)
			return runner.ExitHarness
		}
		fmt.Fprint(stdout, report.Summary(out.Run, out.Result))
		st := out.Result.Stats
		lines = append(lines, fmt.Sprintf("  seed %d: valid=%v  %.1f ok ops/s (%.1f during faults)  %d ops  %s", o.Seed, out.Result.Valid, st.OKPerSec, st.FaultOKPerSec, st.Ops, out.Dir))
		if out.Code == runner.ExitInvalid || (out.Code == runner.ExitUnknown && worst == runner.ExitValid) {
			worst = out.Code
		}
		if out.Code == runner.ExitInvalid || ctx.Err() != nil {
			break
		}
	}
	return worst
}

func parseFlags(args []string, stderr io.Writer) (runner.Options, int, error) {
	fs := flag.NewFlagSet("jepsen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := runner.Options{}
	fs.StringVar(&o.Workload, "workload", "mixed", "append, cas, ryw, mixed, idempotent, retention, consumers, dcb or indexes")
	fs.StringVar(&o.Nemesis, "nemesis", "kill,partition", "none, all, or a comma list of kill, pause, partition, leader-kill, transfer, membership")
	fs.IntVar(&o.Nodes, "nodes", 3, "cluster size: 3 or 5")
	fs.DurationVar(&o.Time, "time", 60*time.Second, "how long traffic and faults run")
	fs.Float64Var(&o.Rate, "rate", 100, "operations per second over all clients")
	fs.IntVar(&o.Concurrency, "concurrency", 10, "logical clients")
	seed := fs.Uint64("seed", 0, "random seed for the schedule and the workload (0: from the clock)")
	fs.StringVar(&o.Out, "out", "store", "directory for run outputs (a 'latest' link points at the last run)")
	fs.StringVar(&o.Bin, "bin", "", "skald binary (default: built from this module, with -tags mutants when -mutant is set)")
	fs.StringVar(&o.Mutant, "mutant", "", "run the nodes with a deliberate bug (README.md, Mutants)")
	fs.StringVar(&o.Net, "net", "auto", "auto (netns when root, else proxy), netns (per-node network namespaces) or proxy (userspace proxy per link)")
	fs.DurationVar(&o.Interval, "nemesis-interval", 8*time.Second, "how long each fault lasts (±25%); calm periods last half")
	fs.DurationVar(&o.Quiet, "quiet", 3*time.Second, "fault-free time at the start")
	fs.DurationVar(&o.ClientTimeout, "client-timeout", 2*time.Second, "per-operation timeout (a write past it is indeterminate)")
	fs.BoolVar(&o.Keep, "keep", false, "keep node data directories even when the run is valid")
	fs.BoolVar(&o.DedupeOff, "dedupe-off", false, "create the run's namespace with idempotent writes off (an id sent twice is stored twice)")
	count := fs.Int("count", 1, "runs, each with the next seed; stops at the first invalid run")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: go run ./jepsen [flags]\n       go run ./jepsen check DIR\n       go run ./jepsen clean\n\nRuns a chaos test against a real Skald cluster and checks the history.\nExit: 0 valid, 1 invalid, 2 unknown, 3 harness error.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, 0, err
	}
	if fs.NArg() > 0 {
		return o, 0, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if o.Nodes != 3 && o.Nodes != 5 {
		return o, 0, fmt.Errorf("-nodes must be 3 or 5, got %d", o.Nodes)
	}
	if !contains(workload.Names, o.Workload) {
		return o, 0, fmt.Errorf("-workload %q: want one of %s", o.Workload, strings.Join(workload.Names, ", "))
	}
	if o.Time <= 0 || o.Rate <= 0 || o.Concurrency <= 0 || *count <= 0 {
		return o, 0, errors.New("-time, -rate, -concurrency and -count must be positive")
	}
	o.Seed = *seed
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	o.Logf = func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s jepsen: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	return o, *count, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// buildSkald builds cmd/skald of this module into dir.
func buildSkald(ctx context.Context, dir string, mutants bool, stderr io.Writer) (string, error) {
	name, args := "skald", []string{"build"}
	if mutants {
		name, args = "skald-mutants", append(args, "-tags", "mutants")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "-o", bin, "github.com/skalddb/skald/cmd/skald")...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	return bin, cmd.Run()
}

// runCheck re-runs the checker on a saved run directory.
func runCheck(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: jepsen check DIR")
		return runner.ExitHarness
	}
	dir := args[0]
	ops, err := history.Load(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		fmt.Fprintln(stderr, "jepsen:", err)
		return runner.ExitHarness
	}
	var prev report.Results
	if b, err := os.ReadFile(filepath.Join(dir, "results.json")); err == nil {
		json.Unmarshal(b, &prev)
	}
	var cfg runner.Options
	if b, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil {
		json.Unmarshal(b, &cfg)
	}
	final := map[string][]history.Event{}
	var nodes []string
	for i := range cfg.Nodes {
		n := fmt.Sprintf("n%d", i+1)
		nodes = append(nodes, n)
		b, err := os.ReadFile(filepath.Join(dir, "final", n+".json"))
		if err != nil {
			continue
		}
		var evs []history.Event
		if err := json.Unmarshal(b, &evs); err != nil {
			fmt.Fprintf(stderr, "jepsen: final/%s.json: %v\n", n, err)
			return runner.ExitHarness
		}
		final[n] = evs
	}
	in := checker.Input{Ops: ops, Final: final, Nodes: nodes}
	if b, err := os.ReadFile(filepath.Join(dir, "final", "indexes.json")); err == nil {
		var fi runner.FinalIndexes
		if err := json.Unmarshal(b, &fi); err != nil {
			fmt.Fprintf(stderr, "jepsen: final/indexes.json: %v\n", err)
			return runner.ExitHarness
		}
		in.IndexDefs, in.FinalIndexes = fi.Defs, fi.Reads
	}
	res := checker.Check(in, checker.Options{VisualizeDir: filepath.Join(dir, "linear")})
	run := prev.Run
	run.Dir = dir
	if err := report.Write(dir, run, res, ops); err != nil {
		fmt.Fprintln(stderr, "jepsen:", err)
		return runner.ExitHarness
	}
	fmt.Fprint(stdout, report.Summary(run, res))
	return runner.ExitCode(res)
}
