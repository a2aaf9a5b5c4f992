// Package runner owns one chaos run from start to verdict: the output
// directory, the cluster, traffic and faults side by side, healing, the
// final reads every node must agree on, checking and the report. It must
// leave no process or namespace behind, whatever happens.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skalddb/skald/jepsen/internal/checker"
	"github.com/skalddb/skald/jepsen/internal/client"
	"github.com/skalddb/skald/jepsen/internal/cluster"
	"github.com/skalddb/skald/jepsen/internal/history"
	"github.com/skalddb/skald/jepsen/internal/nemesis"
	"github.com/skalddb/skald/jepsen/internal/report"
	"github.com/skalddb/skald/jepsen/internal/workload"
)

// Options is one run's configuration (the CLI flags).
type Options struct {
	Workload      string        `json:"workload"`
	Nemesis       string        `json:"nemesis"`
	Nodes         int           `json:"nodes"`
	Time          time.Duration `json:"time"`
	Rate          float64       `json:"rate"`
	Concurrency   int           `json:"concurrency"`
	Seed          uint64        `json:"seed"`
	Out           string        `json:"out"`
	Bin           string        `json:"bin"`
	Mutant        string        `json:"mutant,omitempty"`
	Net           string        `json:"net"` // auto, netns, proxy
	Interval      time.Duration `json:"nemesis_interval"`
	Quiet         time.Duration `json:"quiet"`
	ClientTimeout time.Duration `json:"client_timeout"`
	Keep          bool          `json:"keep"`
	// DedupeOff creates the run's namespace with idempotent writes off:
	// a message id written again is stored again (what a namespace made
	// with --dedupe-window off, or a client without ids, gets).
	DedupeOff bool                             `json:"dedupe_off,omitempty"`
	Logf      func(format string, args ...any) `json:"-"`
}

// Exit codes.
const (
	ExitValid   = 0
	ExitInvalid = 1
	ExitUnknown = 2
	ExitHarness = 3
)

// Outcome is what a run ended with.
type Outcome struct {
	Run    report.Run
	Dir    string
	Result checker.Result
	Code   int
}

// Run performs one run. An error means the harness itself failed (exit 3).
func Run(ctx context.Context, o Options) (Outcome, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	faults, err := nemesis.Parse(o.Nemesis)
	if err != nil {
		return Outcome{Code: ExitHarness}, err
	}
	dir := filepath.Join(o.Out, fmt.Sprintf("%s-%s-%s", o.Workload, sanitize(o.Nemesis), time.Now().UTC().Format("20060102T150405.000")))
	if o.Mutant != "" {
		dir += "-" + o.Mutant
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Outcome{Code: ExitHarness}, err
	}
	latest := filepath.Join(o.Out, "latest")
	os.Remove(latest)
	os.Symlink(filepath.Base(dir), latest)
	out := Outcome{Dir: dir, Code: ExitHarness}
	cfg, _ := json.MarshalIndent(o, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		return out, err
	}

	net, err := newNetwork(o.Net, o.Nodes)
	if err != nil {
		return out, err
	}
	o.Logf("seed %d, output %s, network %s", o.Seed, dir, net.Name())
	c, err := cluster.Start(ctx, cluster.Config{
		Bin: o.Bin, Nodes: o.Nodes, Dir: filepath.Join(dir, "nodes"), Net: net, Mutant: o.Mutant, Logf: o.Logf,
		// Small snapshots so lagging followers need InstallSnapshot.
		// Expiry every 200 ms: the retention workload's capped streams
		// lose messages while traffic runs (other workloads set no policy).
		Args: []string{"--raft-snapshot-threshold", "500", "--raft-trailing-logs", "200", "--log-level", "debug", "--retention-interval", "200ms"},
	})
	if err != nil {
		net.Close()
		return out, fmt.Errorf("start cluster: %w", err)
	}
	defer c.Close()
	o.Logf("cluster of %d up", o.Nodes)
	token, err := c.CreateNamespace(ctx, "jepsen", o.DedupeOff)
	if err != nil {
		return out, err
	}
	var (
		maxCount map[string]int64
		maxAge   map[string]time.Duration
	)
	if o.Workload == "retention" {
		if err := c.SetRetention(ctx, "jepsen", workload.RetentionCategory, 0, workload.RetentionMaxCount); err != nil {
			return out, err
		}
		if err := c.SetRetention(ctx, "jepsen", workload.AgeCategory, workload.RetentionMaxAge, 0); err != nil {
			return out, err
		}
		maxCount = map[string]int64{workload.RetentionCategory: workload.RetentionMaxCount}
		maxAge = map[string]time.Duration{workload.AgeCategory: workload.RetentionMaxAge}
	}
	var indexDefs []history.IndexDef
	if o.Workload == "indexes" {
		indexDefs = workload.IndexDefs
	}

	hf, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return out, err
	}
	defer hf.Close()
	rec := history.NewRecorder(hf)
	cl := client.New(rec, c.URLs(), token, o.ClientTimeout)
	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
	}
	if err := createIndexes(ctx, cl, names, indexDefs); err != nil {
		return out, err
	}
	var consumers *workload.Consumers
	if o.Workload == "consumers" {
		if consumers, err = workload.StartConsumers(ctx, cl, names, len(names)+1, o.Seed); err != nil {
			return out, err
		}
		defer consumers.Stop()
	}

	rng := rand.New(rand.NewPCG(o.Seed, 0x6a6570))
	nem := nemesis.New(c, rec, nemesis.Config{Faults: faults, Quiet: o.Quiet, Interval: o.Interval, Rng: rng, Logf: o.Logf})
	run := report.Run{Dir: dir, Seed: o.Seed, Workload: o.Workload, Nemesis: o.Nemesis, Nodes: o.Nodes, Net: net.Name(), Mutant: o.Mutant, Skipped: nem.Skipped(net)}
	for f, why := range run.Skipped {
		o.Logf("skipping fault %s: %s", f, why)
	}

	tctx, cancel := context.WithTimeout(ctx, o.Time)
	var wg sync.WaitGroup
	var werr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		werr = workload.Run(tctx, cl, workload.Config{Name: o.Workload, Concurrency: o.Concurrency, Rate: o.Rate, Nodes: names, Seed: o.Seed})
	}()
	go func() {
		defer wg.Done()
		nem.Run(tctx, run.Skipped)
	}()
	progress := time.NewTicker(10 * time.Second)
	go func() {
		for {
			select {
			case <-tctx.Done():
				return
			case <-progress.C:
				o.Logf("%d history lines", len(rec.Ops()))
			}
		}
	}()
	wg.Wait()
	progress.Stop()
	cancel()
	if werr != nil {
		return out, werr
	}
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("interrupted: %w", err)
	}
	o.Logf("traffic done; healing and reading the final logs")

	if err := c.WaitHealthy(ctx, 60*time.Second); err != nil {
		run.Errors = append(run.Errors, "after healing: "+err.Error())
	}
	if o.Workload == "retention" {
		// Expiry would go on removing while the nodes' final logs are read
		// one after another (they would differ): remove the policies
		// first; the marker the final reads wait for comes after, so every
		// node has applied the removal when it is read.
		for cat := range maxCount {
			if err := c.SetRetention(ctx, "jepsen", cat, 0, 0); err != nil {
				run.Errors = append(run.Errors, "clearing the retention policies: "+err.Error())
			}
		}
		for cat := range maxAge {
			if err := c.SetRetention(ctx, "jepsen", cat, 0, 0); err != nil {
				run.Errors = append(run.Errors, "clearing the retention policies: "+err.Error())
			}
		}
	}
	final := finalReads(ctx, cl, rec, c, names, o, &run)
	var finalIdx map[string]map[string]history.IndexRead
	if len(indexDefs) > 0 {
		finalIdx = finalIndexes(ctx, cl, final, indexDefs, &run)
	}
	if consumers != nil {
		// Every message of the group's category must be acknowledged:
		// let the consumers finish (the checker judges what they missed).
		var want []string
		for _, evs := range final {
			for _, e := range evs {
				if strings.HasPrefix(e.Stream, workload.GroupCategory+"-") {
					want = append(want, e.ID)
				}
			}
			break
		}
		if missing := consumers.Drain(ctx, want, 60*time.Second); missing > 0 {
			o.Logf("consumers: %d of %d messages not acknowledged after 60s", missing, len(want))
		}
	}
	if err := rec.Flush(); err != nil {
		return out, err
	}
	fdir := filepath.Join(dir, "final")
	os.MkdirAll(fdir, 0o755)
	for n, evs := range final {
		b, _ := json.Marshal(evs)
		os.WriteFile(filepath.Join(fdir, n+".json"), b, 0o644)
	}
	if len(indexDefs) > 0 {
		b, _ := json.Marshal(FinalIndexes{Defs: indexDefs, Reads: finalIdx})
		os.WriteFile(filepath.Join(fdir, "indexes.json"), b, 0o644)
	}

	ops := rec.Ops()
	res := checker.Check(checker.Input{Ops: ops, Final: final, Nodes: names, MaxCount: maxCount, MaxAge: maxAge,
		IndexDefs: indexDefs, FinalIndexes: finalIdx}, checker.Options{VisualizeDir: filepath.Join(dir, "linear")})
	out.Result, out.Run = res, run
	if err := report.Write(dir, run, res, ops); err != nil {
		return out, err
	}
	out.Code = ExitCode(res)
	if out.Code == ExitValid && !o.Keep {
		c.Close()
		c.RemoveData()
	}
	return out, nil
}

// FinalIndexes is final/indexes.json: the indexes of the run and every
// node's final read of each (node → index name → read).
type FinalIndexes struct {
	Defs  []history.IndexDef                      `json:"defs"`
	Reads map[string]map[string]history.IndexRead `json:"reads"`
}

// ExitCode is the exit code for a verdict.
func ExitCode(res checker.Result) int {
	switch res.Valid {
	case true:
		return ExitValid
	case false:
		return ExitInvalid
	}
	return ExitUnknown
}

// finalReads appends a marker through any node (which must succeed: the
// cluster recovered), then reads the whole log from every node once it has
// applied the marker.
func finalReads(ctx context.Context, cl *client.Client, rec *history.Recorder, c *cluster.Cluster, names []string, o Options, run *report.Run) map[string][]history.Event {
	const finalProcess = 1 << 20
	deadline := time.Now().Add(60 * time.Second)
	var marker string
	for attempt := 0; time.Now().Before(deadline) && ctx.Err() == nil; attempt++ {
		id := cl.NewID(finalProcess + attempt)
		op := cl.Append(ctx, finalProcess+attempt, names[attempt%len(names)], "final-0", []string{id}, nil)
		if op.Type == history.OK {
			marker = id
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if marker == "" {
		run.Errors = append(run.Errors, "no-recovery: no write succeeded within 60s after healing")
		return nil
	}
	final := map[string][]history.Event{}
	for _, n := range names {
		for time.Now().Before(deadline.Add(30*time.Second)) && ctx.Err() == nil {
			evs, err := readAll(ctx, cl, n)
			if err == nil && contains(evs, marker) {
				final[n] = evs
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		if _, ok := final[n]; !ok {
			run.Errors = append(run.Errors, fmt.Sprintf("no-recovery: node %s never showed the final marker", n))
		}
	}
	settle(ctx, cl, final, marker, time.Now().Add(settleWait))
	return final
}

// settleWait bounds how long the final reads wait for the nodes' logs to
// end alike.
const settleWait = 15 * time.Second

// settle reads the nodes' logs again until they all end at the same
// global position, or until deadline. The marker is not always the last
// write: an append a client gave up on (indeterminate) can still be
// forwarded and applied after it, and a node read the moment it showed
// the marker would then lack it while the others, read later, hold it. A
// real divergence still shows: logs that end alike but differ, or a node
// that never catches up by the deadline, go to the checker as last read.
func settle(ctx context.Context, cl *client.Client, final map[string][]history.Event, marker string, deadline time.Time) {
	end := func(evs []history.Event) int64 {
		if len(evs) == 0 {
			return 0
		}
		return evs[len(evs)-1].Global
	}
	for ctx.Err() == nil {
		var ends []int64
		for _, evs := range final {
			ends = append(ends, end(evs))
		}
		if len(ends) == 0 || slices.Min(ends) == slices.Max(ends) || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(300 * time.Millisecond)
		for n := range final {
			if evs, err := readAll(ctx, cl, n); err == nil && contains(evs, marker) {
				final[n] = evs
			}
		}
	}
}

func readAll(ctx context.Context, cl *client.Client, node string) ([]history.Event, error) {
	var all []history.Event
	from := int64(1)
	for {
		evs, _, err := cl.ReadAll(ctx, node, from, 1000, history.Local)
		if err != nil {
			return nil, err
		}
		// Only an empty page is the end: the server may cut a page
		// short at its byte cap (--read-page-bytes).
		if len(evs) == 0 {
			return all, nil
		}
		all = append(all, evs...)
		from = evs[len(evs)-1].Global + 1
	}
}

func contains(evs []history.Event, id string) bool {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].ID == id {
			return true
		}
	}
	return false
}

func newNetwork(kind string, n int) (cluster.Network, error) {
	switch kind {
	case "netns":
		return cluster.NewNetns(n)
	case "proxy":
		return cluster.NewProxy(n, freeBase())
	case "", "auto":
		nn, err := cluster.NewNetns(n)
		if err == nil {
			return nn, nil
		}
		if !errors.Is(err, cluster.ErrNoPartitions) {
			return nil, err
		}
		return cluster.NewProxy(n, freeBase())
	}
	return nil, fmt.Errorf("unknown -net %q (auto, netns, proxy)", kind)
}

// freeBase picks a port range unlikely to be in use.
func freeBase() int { return 20000 + rand.IntN(400)*100 }

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ',' {
			b[i] = '+'
		}
	}
	return string(b)
}
