package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skalddb/skald/jepsen/internal/checker"
	"github.com/skalddb/skald/jepsen/internal/history"
	"github.com/skalddb/skald/jepsen/internal/runner"
	"github.com/skalddb/skald/node"
)

// The chaos runs start real clusters and take minutes: they run only with
// JEPSEN=1 (.ci/run sets it; `make jepsen-ci` too).
func requireJepsen(t *testing.T) {
	t.Helper()
	if os.Getenv("JEPSEN") != "1" {
		t.Skip("set JEPSEN=1 to run chaos tests")
	}
}

var (
	buildOnce sync.Once
	binDir    string // holds bins; TestMain removes it
	bins      = map[bool]string{}
	buildErr  error
)

// TestMain removes the binaries the runs built once they are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds skald with and without mutants once per test binary.
func binaries(t *testing.T) (plain, mutants string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jepsen-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		for _, m := range []bool{false, true} {
			if bins[m], buildErr = buildSkald(context.Background(), dir, m, os.Stderr); buildErr != nil {
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("build skald: %v", buildErr)
	}
	return bins[false], bins[true]
}

func options(t *testing.T, bin string) runner.Options {
	return runner.Options{
		Nodes: 3, Rate: 100, Concurrency: 10, Seed: uint64(time.Now().UnixNano()), Out: t.TempDir(), Bin: bin, Net: "auto",
		Interval: 6 * time.Second, Quiet: 2 * time.Second, ClientTimeout: 2 * time.Second,
		Logf: func(format string, args ...any) { t.Logf(format, args...) },
	}
}

// logSummary logs a run's summary.
func logSummary(t *testing.T, out runner.Outcome) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(out.Dir, "summary.txt")); err == nil {
		t.Logf("summary of %s:\n%s", out.Dir, b)
	}
}

// TestSmoke: a 3-node cluster under the mixed workload with kills and
// partitions must be valid, and the run must have checked something.
func TestSmoke(t *testing.T) {
	requireJepsen(t)
	plain, _ := binaries(t)
	o := options(t, plain)
	o.Workload, o.Nemesis, o.Time = "mixed", "kill,partition", 45*time.Second
	out, err := runner.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("harness error (seed %d): %v", o.Seed, err)
	}
	logSummary(t, out)
	res := out.Result
	if res.Valid != true {
		t.Fatalf("seed %d: valid = %v, want true; anomalies %v, unknown %v", o.Seed, res.Valid, res.Anomalies, res.Unknown)
	}
	if len(out.Run.Skipped) > 0 {
		t.Fatalf("faults skipped, so the smoke run proves less than it claims: %v", out.Run.Skipped)
	}
	// A smoke run that checked nothing must not pass.
	st := res.Stats
	if oks := st.ByF[history.FAppend][history.OK]; oks < 200 {
		t.Fatalf("only %d acknowledged appends", oks)
	}
	for _, f := range []string{history.FReadStream, history.FReadCategory, history.FVersion} {
		if st.ByF[f][history.OK] < 20 {
			t.Fatalf("only %d ok %s operations", st.ByF[f][history.OK], f)
		}
	}
	if res.Linear.Result != "ok" || res.Linear.Ops < 200 {
		t.Fatalf("linearizability %s over %d ops", res.Linear.Result, res.Linear.Ops)
	}
	for name, v := range res.Checkers {
		if v != "valid" {
			t.Fatalf("checker %s: %s", name, v)
		}
	}
	if ws := history.Windows(mustLoad(t, out.Dir)); len(ws) < 2 {
		t.Fatalf("only %d fault windows in 45 s", len(ws))
	}
}

// TestSmokeIdempotent: the idempotent workload (unknown outcomes retried
// with the same ids, some appends hedged through two nodes) under kills
// and partitions must be valid: every id once in the final log, every
// acknowledgement of a retry at the original's positions.
func TestSmokeIdempotent(t *testing.T) {
	res := validSmokeRun(t, "idempotent", "kill,partition", 20*time.Second)
	st := res.Stats
	if oks := st.ByF[history.FAppend][history.OK]; oks < 100 {
		t.Fatalf("only %d acknowledged appends", oks)
	}
	// Hedged appends: the second attempt of each must have been answered
	// as a duplicate, so the run exercised dedupe.
	if st.Retried < 10 || st.DuplicateAcks < 5 {
		t.Fatalf("only %d appends sent more than once, %d acknowledged as duplicates", st.Retried, st.DuplicateAcks)
	}
}

// TestSmokeConsumers: a pinned subscription group whose consumers ack
// under kills, partitions and leadership transfers must deliver and
// acknowledge every message of its category at least once, each stream
// first delivered in order.
func TestSmokeConsumers(t *testing.T) {
	res := validSmokeRun(t, "consumers", "kill,partition,transfer", 20*time.Second)
	if st := res.Stats; st.Deliveries < 100 || st.AcksOK < 100 || res.Checkers["consumers"] != "valid" {
		t.Fatalf("deliveries %d, acks %d, consumers checker %q", st.Deliveries, st.AcksOK, res.Checkers["consumers"])
	}
}

// TestSmokeRetention: appends racing truncates and soft deletes, and a
// max-count policy expiring a category's messages, under kills and
// partitions must be valid: no node keeps and no later read returns a
// removed message, no acknowledged message a removal or the policy did
// not cover is lost, every node ends with the same log.
func TestSmokeRetention(t *testing.T) {
	res := validSmokeRun(t, "retention", "kill,partition", 15*time.Second)
	st := res.Stats
	if oks := st.ByF[history.FAppend][history.OK]; oks < 100 {
		t.Fatalf("only %d acknowledged appends", oks)
	}
	if oks := st.ByF[history.FTruncate][history.OK]; oks < 20 {
		t.Fatalf("only %d acknowledged truncates", oks)
	}
	if oks := st.ByF[history.FDelete][history.OK]; oks < 1 {
		t.Fatalf("no acknowledged delete (%v)", st.ByF[history.FDelete])
	}
	if oks := st.ByF[history.FWatermark][history.OK]; oks < 1 {
		t.Fatalf("no acknowledged watermark deletion (%v)", st.ByF[history.FWatermark])
	}
	for _, name := range []string{"removals", "retention-streams", "expiry", "durability", "convergence"} {
		if res.Checkers[name] != "valid" {
			t.Fatalf("checker %s: %q, want valid (checkers %v)", name, res.Checkers[name], res.Checkers)
		}
	}
}

// TestSmokeDCB: deciders reading by tags and appending on condition, under
// kills and partitions, must be valid: replaying the final log, no
// acknowledged conditional append has a message matching its condition
// between its position and its own, and every refusal named a real match.
func TestSmokeDCB(t *testing.T) {
	// 400 ops/s: at the default 100 few decisions overlap in time.
	res := validSmokeRun(t, "dcb", "kill,partition", 15*time.Second, func(o *runner.Options) { o.Rate = 400 })
	st := res.Stats
	if oks := st.ByF[history.FAppend][history.OK]; oks < 100 {
		t.Fatalf("only %d acknowledged conditional appends", oks)
	}
	if fails := st.ByF[history.FAppend][history.Fail]; fails < 20 {
		t.Fatalf("only %d refused conditional appends: the deciders did not contend", fails)
	}
	if res.Checkers["dcb"] != "valid" {
		t.Fatalf("checker dcb: %q (checkers %v)", res.Checkers["dcb"], res.Checkers)
	}
}

// TestSmokeIndexes: appends with chosen field values racing truncates and
// deletes, and queries of two user-defined indexes at every consistency,
// under kills and partitions, must be valid: every node's index equals
// the checker's model of its own final log, and no linearizable query
// misses an earlier acknowledged append or returns an earlier removal.
func TestSmokeIndexes(t *testing.T) {
	res := validSmokeRun(t, "indexes", "kill,partition", 15*time.Second)
	st := res.Stats
	if oks := st.ByF[history.FAppend][history.OK]; oks < 100 {
		t.Fatalf("only %d acknowledged appends", oks)
	}
	if oks := st.ByF[history.FTruncate][history.OK]; oks < 10 {
		t.Fatalf("only %d acknowledged truncates", oks)
	}
	if oks := st.ByF[history.FIndexQuery][history.OK]; oks < 100 || st.IndexHits < 200 {
		t.Fatalf("%d ok index queries with %d hits: too few to judge", oks, st.IndexHits)
	}
	if st.FinalIndexEntries < 20 {
		t.Fatalf("the final indexes hold only %d entries", st.FinalIndexEntries)
	}
	if res.Checkers["indexes"] != "valid" {
		t.Fatalf("checker indexes: %q (checkers %v)", res.Checkers["indexes"], res.Checkers)
	}
}

// validSmokeRun runs workload under nemesis on 3 nodes for d (mods change
// the options) and fails the test unless the verdict is valid; it returns
// the result.
func validSmokeRun(t *testing.T, workload, nemesis string, d time.Duration, mods ...func(*runner.Options)) checker.Result {
	t.Helper()
	requireJepsen(t)
	plain, _ := binaries(t)
	o := options(t, plain)
	o.Workload, o.Nemesis, o.Time = workload, nemesis, d
	for _, m := range mods {
		m(&o)
	}
	out, err := runner.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("harness error (seed %d): %v", o.Seed, err)
	}
	logSummary(t, out)
	if out.Result.Valid != true {
		t.Fatalf("seed %d: valid = %v, want true; anomalies %v, unknown %v", o.Seed, out.Result.Valid, out.Result.Anomalies, out.Result.Unknown)
	}
	return out.Result
}

func mustLoad(t *testing.T, dir string) []history.Op {
	ops, err := history.Load(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// mutantCases pair each deliberate bug with a scenario that must find it.
var mutantCases = []struct {
	mutant, workload, nemesis string
	rate                      float64
	concurrency               int
	time                      time.Duration
	anomalies                 []string // any of these
	// dedupeOff: idempotent writes would hide the bug (forward-retry
	// re-sends a write with the same ids, which the server deduplicates).
	dedupeOff bool
}{
	{node.MutantCASOutsideFSM, "cas", "none", 1000, 20, 15 * time.Second, []string{"cas-double-success"}, false},
	{node.MutantAckBeforeCommit, "append", "leader-kill", 100, 10, 20 * time.Second, []string{"lost", "ack-mismatch", "category-foreign"}, false},
	{node.MutantStaleLinearizable, "mixed", "pause,partition", 100, 10, 20 * time.Second, []string{"stale-read", "linearizability"}, false},
	{node.MutantRYWNoWait, "ryw", "pause", 200, 10, 20 * time.Second, []string{"ryw-violation"}, false},
	{node.MutantForwardRetry, "append", "none", 1000, 20, 15 * time.Second, []string{"duplicate"}, true},
	{node.MutantDedupeAtPropose, "idempotent", "none", 1000, 20, 10 * time.Second, []string{"duplicate", "retry-mismatch"}, false},
	{node.MutantExpireOneTooMany, "retention", "none", 100, 10, 10 * time.Second, []string{"capped-lost", "lost"}, false},
	{node.MutantExpireAgeEarly, "retention", "none", 100, 10, 10 * time.Second, []string{"aged-early"}, false},
	{node.MutantCheckpointAhead, "consumers", "transfer", 300, 10, 20 * time.Second, []string{"group-undelivered", "group-unacked"}, false},
	{node.MutantConditionAtPropose, "dcb", "none", 1000, 20, 10 * time.Second, []string{"dcb-conflict"}, false},
	{node.MutantIndexDropEntry, "indexes", "none", 100, 10, 10 * time.Second, []string{"index-missing", "index-stale-read"}, false},
	{node.MutantIndexSkipRemoval, "indexes", "none", 100, 10, 10 * time.Second, []string{"index-count"}, false},
	{node.MutantGlobalPosAtPropose, "append", "transfer,leader-kill", 1000, 20, 20 * time.Second,
		[]string{"global-gap", "global-dup", "order-mismatch", "realtime-order", "category-hole", "stream-gap", "incompatible-order", "lost", "ack-mismatch", "category-foreign"}, false},
}

// mutantAttempts bounds the runs a mutant gets. Catching a bug under
// random faults is probabilistic: a scenario that catches its mutant in
// most runs can still miss one (CI saw ryw-no-wait and
// global-pos-at-propose each slip through once in a 20 s run). Each
// attempt uses a fresh seed and every miss is logged with its seed, so a
// mutant fails the test only when it escapes every attempt.
const mutantAttempts = 3

// TestMutants: every mutant's scenario must end invalid with its anomaly.
func TestMutants(t *testing.T) {
	requireJepsen(t)
	_, mut := binaries(t)
	for _, mc := range mutantCases {
		t.Run(mc.mutant, func(t *testing.T) {
			var misses []string
			for attempt := 1; attempt <= mutantAttempts; attempt++ {
				o := options(t, mut)
				o.Mutant, o.Workload, o.Nemesis, o.Rate, o.Concurrency, o.Time = mc.mutant, mc.workload, mc.nemesis, mc.rate, mc.concurrency, mc.time
				o.Interval = 4 * time.Second
				o.DedupeOff = mc.dedupeOff
				o.Seed += uint64(attempt)
				out, err := runner.Run(context.Background(), o)
				if err != nil {
					t.Fatalf("harness error (seed %d): %v", o.Seed, err)
				}
				if caught(out.Result.Anomalies, mc.anomalies) && out.Result.Valid == false {
					t.Logf("mutant %s caught on attempt %d (seed %d): %v", mc.mutant, attempt, o.Seed, out.Result.Anomalies)
					return
				}
				logSummary(t, out)
				miss := fmt.Sprintf("seed %d: valid = %v, anomalies %v", o.Seed, out.Result.Valid, out.Result.Anomalies)
				t.Logf("mutant %s missed on attempt %d: %s", mc.mutant, attempt, miss)
				misses = append(misses, miss)
			}
			t.Fatalf("mutant %s escaped all %d attempts (want valid = false with one of %v):\n%s",
				mc.mutant, mutantAttempts, mc.anomalies, strings.Join(misses, "\n"))
		})
	}
}

// caught reports whether any of the wanted anomalies was found.
func caught(found map[string]int, want []string) bool {
	for _, a := range want {
		if found[a] > 0 {
			return true
		}
	}
	return false
}
