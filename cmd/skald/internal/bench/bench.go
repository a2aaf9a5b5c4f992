package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

const benchUsage = `skald bench [flags]

Measures a running cluster (any nodes). With the admin token it writes into a namespace of
its own, bench-<run>, created before and deleted after the run; --token-namespace writes into
the token's namespace instead (what a namespace token must do) and leaves the data there.
Workloads:
  append         one message per call (unary)
  append-stream  one message per call, the client's appends sharing a few AppendStreams per node
                 over HTTP/2 (the Go client's default; --http2 implied)
  evdb-append    one message per call as EventoDB's SDKs send it: POST /rpc stream.write (JSON, HTTP/1.1)
  append-batch   --batch messages per call
  read-stream    read 100 messages of a stream (streams are filled first)
  read-category  read 100 messages of the category as a consumer-group member
  mixed          appends and stream reads, --read-ratio of them reads
  subscribe      end-to-end latency from an append on the first node to delivery on the last,
                 at --rate appends per second
  consume        a persistent subscription group with --concurrency consumers over the targets:
                 appends at --rate, each delivered and acknowledged; messages/s acknowledged and
                 latency from the append's send to its ack's answer
--index (append, evdb-append, append-batch, mixed) creates one user-defined index on the
category the run writes and samples every target node's lag on it at LOCAL every 100ms: the
age of the oldest event its index does not hold yet (index_lag_ms p50/p99/max) and the most
events behind (index_lag_events_max).

Targets (--target): which nodes receive the calls, through the Go client (package client).
  all, leader, followers   one client pinned to each chosen node (callers take turns): a node
                           that is not the leader forwards writes, so forwarding is measured
  cluster                  one cluster-aware client over every --addr, as a Go application uses
                           it: writes go straight to the leader, reads round robin over members
Each node gets one HTTP/1.1 connection per concurrent caller; --http2 multiplexes the callers
over one HTTP/2 connection per node instead (h2c on http://), which costs the server more CPU
per request.
`

type benchConfig struct {
	addrs       []string
	workload    string
	concurrency int
	duration    time.Duration
	batch       int
	payload     int
	streams     int
	consistency client.Consistency
	target      string // all, leader, followers (pinned clients) or cluster
	http2       bool   // the client's own HTTP/2 transport instead of HTTP/1.1 pools
	readRatio   float64
	rate        int
	run         string    // prefix that keeps runs apart
	cpu         *cpuMeter // every --addr node, not only the targets; nil: not measured
	index       bool      // --index: create an index on the run's category, sample its lag
}

// Run runs skald bench with args, the words after "bench".
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("bench", benchUsage, stderr)
	workload := fs.String("workload", "append", "append, append-stream, evdb-append, append-batch, read-stream, read-category, mixed, subscribe or consume")
	concurrency := fs.Int("concurrency", 16, "concurrent callers")
	duration := fs.Duration("duration", 10*time.Second, "how long to measure")
	batch := fs.Int("batch", 100, "messages per call (append-batch)")
	payload := fs.Int("payload-bytes", 200, "bytes of each message's data")
	streams := fs.Int("streams", 1000, "streams to spread writes and reads over")
	consistency := fs.String("consistency", "linearizable", "reads: linearizable, session or local")
	readRatio := fs.Float64("read-ratio", 0.5, "share of reads (mixed)")
	rate := fs.Int("rate", 1000, "appends per second (subscribe, consume)")
	target := fs.String("target", "all", "which of --addr to call: all, leader or followers (from Cluster.Status), each pinned; or cluster (one cluster-aware client)")
	http2 := fs.Bool("http2", false, "call over HTTP/2 (one multiplexed connection per node; more server CPU per request) instead of one HTTP/1.1 connection per caller")
	plot := fs.String("plot", "", "also write throughput and latency per second to this HTML file")
	standard := fs.Bool("standard", false, "run the standard set (append x64, append-batch 100 x16, follower reads, mixed, subscribe) and print one table")
	index := fs.Bool("index", false, "create one index on the written category (a string field of the data) before the run and sample every target node's lag on it at LOCAL every 100ms (append, evdb-append, append-batch, mixed)")
	tokenNS := fs.Bool("token-namespace", false, "write into the token's namespace and leave the data there, instead of a namespace of the run's own (bench-<run>, created and deleted; needs the admin token)")
	if _, err := cf.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *standard {
		return runStandardBench(ctx, cf, *duration, *http2, *plot, *tokenNS, stdout, stderr)
	}
	addrs, err := selectTargets(ctx, cf, strings.Split(cf.Addr, ","), *target)
	if err != nil {
		return err
	}
	cfg := benchConfig{
		addrs: addrs, workload: *workload, concurrency: *concurrency, duration: *duration,
		batch: *batch, payload: *payload, streams: *streams, readRatio: *readRatio, rate: *rate,
		target: *target, http2: *http2, index: *index,
		run: "b" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36),
		cpu: newCPUMeter(cf, strings.Split(cf.Addr, ",")),
	}
	switch *consistency {
	case "linearizable":
		cfg.consistency = client.Linearizable
	case "session":
		cfg.consistency = client.Session
	case "local":
		cfg.consistency = client.Local
	default:
		return command.Exit(command.ExitUsage, fmt.Errorf("--consistency %q: want linearizable, session or local", *consistency))
	}
	if cfg.concurrency < 1 || cfg.batch < 1 || cfg.batch > 1000 || cfg.streams < 1 || cfg.payload < 2 {
		return command.Exit(command.ExitUsage, errors.New("--concurrency, --streams and --payload-bytes must be positive, --batch 1..1000"))
	}
	if cfg.index && !slices.Contains(indexWorkloads, cfg.workload) {
		return command.Exit(command.ExitUsage, fmt.Errorf("--index: the %s workload writes no category to index (want one of %s)", cfg.workload, strings.Join(indexWorkloads, ", ")))
	}
	if !*tokenNS {
		wf, cleanup, err := benchNamespace(ctx, cf, cfg.run, stderr)
		if err != nil {
			return err
		}
		defer cleanup()
		cf = wf
	}
	res, err := cfg.execute(ctx, cf, stderr)
	if err != nil {
		return err
	}
	return benchReport(stdout, stderr, cf.Output, *plot, []*Result{res}, []string{*target})
}

// runStandardBench runs the set the targets are stated for.
func runStandardBench(ctx context.Context, cf *command.Flags, d time.Duration, http2 bool, plot string, tokenNS bool, stdout, stderr io.Writer) error {
	all := strings.Split(cf.Addr, ",")
	admin := cf // finds the targets and reads /metrics
	if !tokenNS {
		wf, cleanup, err := benchNamespace(ctx, cf, "b"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36), stderr)
		if err != nil {
			return err
		}
		defer cleanup()
		cf = wf
	}
	set := []struct {
		target string
		cfg    benchConfig
	}{
		{"all", benchConfig{workload: "append", concurrency: 64}},
		{"leader", benchConfig{workload: "append", concurrency: 64}},
		{"all", benchConfig{workload: "append-batch", concurrency: 16, batch: 100}},
		{"followers", benchConfig{workload: "read-stream", concurrency: 32}},
		{"followers", benchConfig{workload: "read-category", concurrency: 32}},
		{"all", benchConfig{workload: "mixed", concurrency: 32, readRatio: 0.5}},
		{"all", benchConfig{workload: "subscribe", concurrency: 64, rate: 1000}},
	}
	var (
		results []*Result
		targets []string
	)
	for _, b := range set {
		addrs, err := selectTargets(ctx, admin, all, b.target)
		if err != nil {
			return err
		}
		cfg := b.cfg
		cfg.addrs, cfg.duration, cfg.payload, cfg.streams = addrs, d, 200, 1000
		cfg.target, cfg.http2, cfg.consistency = b.target, http2, client.Linearizable
		cfg.run = "b" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
		cfg.cpu = newCPUMeter(admin, all)
		if cfg.batch == 0 {
			cfg.batch = 1
		}
		if cfg.workload == "subscribe" && len(all) > 1 {
			cfg.addrs = []string{all[0], all[len(all)-1]}
		}
		fmt.Fprintf(stderr, "== %s (%s, concurrency %d)\n", cfg.workload, b.target, cfg.concurrency)
		res, err := cfg.execute(ctx, cf, stderr)
		if err != nil {
			return err
		}
		results, targets = append(results, res), append(targets, b.target)
	}
	return benchReport(stdout, stderr, cf.Output, plot, results, targets)
}
