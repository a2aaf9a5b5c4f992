package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skalddb/skald/client"
)

const benchUsage = `skald bench [flags]

Measures a running cluster (any nodes; the token's namespace, the admin token works).
Workloads:
  append         one message per call
  evdb-append    one message per call as EventoDB's SDKs send it: POST /rpc stream.write (JSON, HTTP/1.1)
  append-batch   --batch messages per call
  read-stream    read 100 messages of a stream (streams are filled first)
  read-category  read 100 messages of the category as a consumer-group member
  mixed          appends and stream reads, --read-ratio of them reads
  subscribe      end-to-end latency from an append on the first node to delivery on the last,
                 at --rate appends per second

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
}

// benchResult is what -o json prints.
type benchResult struct {
	Workload       string             `json:"workload"`
	Concurrency    int                `json:"concurrency"`
	DurationS      float64            `json:"duration_s"`
	Ops            int64              `json:"ops"`
	Messages       int64              `json:"messages"`
	Errors         int64              `json:"errors"`
	OpsPerSec      float64            `json:"ops_per_sec"`
	MessagesPerSec float64            `json:"messages_per_sec"`
	LatencyMS      map[string]float64 `json:"latency_ms"`
	Timeline       []benchSecond      `json:"timeline"`
	// Server CPU over the measured window, summed over every --addr node;
	// absent when /metrics could not be read. See cpuMeter.
	ServerCPUSeconds  float64 `json:"server_cpu_s,omitempty"`
	ServerCPUUsPerOp  float64 `json:"server_cpu_us_per_op,omitempty"`
	ServerCPUUsPerMsg float64 `json:"server_cpu_us_per_msg,omitempty"`
}

// setCPU records the servers' CPU seconds over the run, when measured.
func (r *benchResult) setCPU(seconds float64, ok bool) {
	if !ok || r.Ops == 0 {
		return
	}
	r.ServerCPUSeconds = seconds
	r.ServerCPUUsPerOp = seconds * 1e6 / float64(r.Ops)
	if r.Messages > 0 {
		r.ServerCPUUsPerMsg = seconds * 1e6 / float64(r.Messages)
	}
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := newClientFlagSet("bench", benchUsage, stderr)
	workload := fs.String("workload", "append", "append, evdb-append, append-batch, read-stream, read-category, mixed or subscribe")
	concurrency := fs.Int("concurrency", 16, "concurrent callers")
	duration := fs.Duration("duration", 10*time.Second, "how long to measure")
	batch := fs.Int("batch", 100, "messages per call (append-batch)")
	payload := fs.Int("payload-bytes", 200, "bytes of each message's data")
	streams := fs.Int("streams", 1000, "streams to spread writes and reads over")
	consistency := fs.String("consistency", "linearizable", "reads: linearizable, session or local")
	readRatio := fs.Float64("read-ratio", 0.5, "share of reads (mixed)")
	rate := fs.Int("rate", 1000, "appends per second (subscribe)")
	target := fs.String("target", "all", "which of --addr to call: all, leader or followers (from Cluster.Status), each pinned; or cluster (one cluster-aware client)")
	http2 := fs.Bool("http2", false, "call over HTTP/2 (one multiplexed connection per node; more server CPU per request) instead of one HTTP/1.1 connection per caller")
	plot := fs.String("plot", "", "also write throughput and latency per second to this HTML file")
	standard := fs.Bool("standard", false, "run the standard set (append x64, append-batch 100 x16, follower reads, mixed, subscribe) and print one table")
	if _, err := cf.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *standard {
		return runStandardBench(ctx, cf, *duration, *http2, *plot, stdout, stderr)
	}
	addrs, err := selectTargets(ctx, cf, strings.Split(cf.addr, ","), *target)
	if err != nil {
		return err
	}
	cfg := benchConfig{
		addrs: addrs, workload: *workload, concurrency: *concurrency, duration: *duration,
		batch: *batch, payload: *payload, streams: *streams, readRatio: *readRatio, rate: *rate,
		target: *target, http2: *http2,
		run: "b" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36),
		cpu: newCPUMeter(cf, strings.Split(cf.addr, ",")),
	}
	switch *consistency {
	case "linearizable":
		cfg.consistency = client.Linearizable
	case "session":
		cfg.consistency = client.Session
	case "local":
		cfg.consistency = client.Local
	default:
		return &exitError{exitUsage, fmt.Errorf("--consistency %q: want linearizable, session or local", *consistency)}
	}
	if cfg.concurrency < 1 || cfg.batch < 1 || cfg.batch > 1000 || cfg.streams < 1 || cfg.payload < 2 {
		return &exitError{exitUsage, errors.New("--concurrency, --streams and --payload-bytes must be positive, --batch 1..1000")}
	}
	res, err := cfg.execute(ctx, cf, stderr)
	if err != nil {
		return err
	}
	return benchReport(stdout, stderr, cf.output, *plot, []*benchResult{res}, []string{*target})
}

// benchReport prints the results as a table or JSON (one object for one
// result) and writes the plot when asked.
func benchReport(stdout, stderr io.Writer, output, plot string, results []*benchResult, targets []string) error {
	if plot != "" {
		var page bytes.Buffer
		if err := writePlot(&page, results, targets); err != nil {
			return err
		}
		if err := os.WriteFile(plot, page.Bytes(), 0o644); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		fmt.Fprintf(stderr, "plot written to %s\n", plot)
	}
	if output == "json" {
		if len(results) == 1 {
			return json.NewEncoder(stdout).Encode(results[0])
		}
		return json.NewEncoder(stdout).Encode(results)
	}
	return benchTable(stdout, results, targets)
}

func benchTable(w io.Writer, results []*benchResult, targets []string) error {
	var rows [][]string
	for i, res := range results {
		cpu := "-"
		if res.ServerCPUSeconds > 0 {
			cpu = fmt.Sprintf("%.0f", res.ServerCPUUsPerOp)
		}
		rows = append(rows, []string{
			res.Workload, targets[i], strconv.Itoa(res.Concurrency), fmt.Sprintf("%.0f", res.OpsPerSec), fmt.Sprintf("%.0f", res.MessagesPerSec),
			fmt.Sprintf("%.2f", res.LatencyMS["p50"]), fmt.Sprintf("%.2f", res.LatencyMS["p90"]), fmt.Sprintf("%.2f", res.LatencyMS["p99"]),
			fmt.Sprintf("%.2f", res.LatencyMS["p999"]), fmt.Sprintf("%.2f", res.LatencyMS["max"]), strconv.FormatInt(res.Errors, 10), cpu,
		})
	}
	return table(w, "WORKLOAD\tNODES\tCONC\tOPS/S\tMSGS/S\tP50 MS\tP90 MS\tP99 MS\tP99.9 MS\tMAX MS\tERRORS\tCPU µS/OP", rows)
}

// runStandardBench runs the set the targets are stated for.
func runStandardBench(ctx context.Context, cf *clientFlags, d time.Duration, http2 bool, plot string, stdout, stderr io.Writer) error {
	all := strings.Split(cf.addr, ",")
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
		results []*benchResult
		targets []string
	)
	for _, b := range set {
		addrs, err := selectTargets(ctx, cf, all, b.target)
		if err != nil {
			return err
		}
		cfg := b.cfg
		cfg.addrs, cfg.duration, cfg.payload, cfg.streams = addrs, d, 200, 1000
		cfg.target, cfg.http2, cfg.consistency = b.target, http2, client.Linearizable
		cfg.run = "b" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
		cfg.cpu = newCPUMeter(cf, all)
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
	return benchReport(stdout, stderr, cf.output, plot, results, targets)
}

func (c *benchConfig) payloadJSON(r *rand.Rand) []byte {
	b := make([]byte, 0, c.payload)
	b = append(b, `{"p":"`...)
	for len(b) < c.payload-2 {
		b = append(b, byte('a'+r.IntN(26)))
	}
	return append(b, `"}`...)
}

func (c *benchConfig) stream(n int) string { return fmt.Sprintf("%s-%d", c.run, n%c.streams) }

// fill writes 100 messages to each stream so reads have something to read.
func (c *benchConfig) fill(ctx context.Context, cl *client.Client, stderr io.Writer) error {
	r := rand.New(rand.NewPCG(1, 2))
	for s := 0; s < c.streams; s++ {
		msgs := make([]client.NewMessage, 100)
		for i := range msgs {
			msgs[i] = client.NewMessage{Type: "Filled", Data: c.payloadJSON(r)}
		}
		if _, err := cl.Append(ctx, c.stream(s), msgs); err != nil {
			return apiError(err)
		}
		if s%100 == 99 {
			fmt.Fprintf(stderr, "\rfilling streams: %d/%d", s+1, c.streams)
		}
	}
	fmt.Fprintln(stderr)
	return nil
}

// op is one measured call; it returns how many messages it moved.
type op func(ctx context.Context, r *rand.Rand) (int, error)

func (c *benchConfig) execute(ctx context.Context, cf *clientFlags, stderr io.Writer) (*benchResult, error) {
	clients, err := c.dial(ctx, cf)
	if err != nil {
		return nil, err
	}
	defer clients.close()
	if c.workload == "subscribe" {
		return c.subscribe(ctx, clients, stderr)
	}
	if c.workload == "read-stream" || c.workload == "read-category" || c.workload == "mixed" {
		if err := c.fill(ctx, clients.of(0), stderr); err != nil {
			return nil, err
		}
	}
	ops := make([]op, c.concurrency)
	for w := range ops {
		cl := clients.of(w)
		appendN := func(n int) op {
			return func(ctx context.Context, r *rand.Rand) (int, error) {
				msgs := make([]client.NewMessage, n)
				for i := range msgs {
					msgs[i] = client.NewMessage{Type: "Bench", Data: c.payloadJSON(r)}
				}
				_, err := cl.Append(ctx, c.stream(r.IntN(c.streams)), msgs)
				return n, err
			}
		}
		readStream := func(ctx context.Context, r *rand.Rand) (int, error) {
			msgs, err := cl.ReadStream(ctx, client.StreamQuery{Stream: c.stream(r.IntN(c.streams)), Limit: 100})
			return len(msgs), err
		}
		switch c.workload {
		case "append":
			ops[w] = appendN(1)
		case "evdb-append":
			ops[w] = c.evdbAppend(cf, w)
		case "append-batch":
			ops[w] = appendN(c.batch)
		case "read-stream":
			ops[w] = readStream
		case "read-category":
			ops[w] = func(ctx context.Context, r *rand.Rand) (int, error) {
				msgs, err := cl.ReadCategory(ctx, client.CategoryQuery{Category: c.run, Limit: 100,
					GlobalPosition: 1 + r.Int64N(int64(c.streams)*50), Group: client.ConsumerGroup{Member: int64(w % 4), Size: 4}})
				return len(msgs), err
			}
		case "mixed":
			write := appendN(1)
			ops[w] = func(ctx context.Context, r *rand.Rand) (int, error) {
				if r.Float64() < c.readRatio {
					return readStream(ctx, r)
				}
				return write(ctx, r)
			}
		default:
			return nil, &exitError{exitUsage, fmt.Errorf("--workload %q: unknown (see --help)", c.workload)}
		}
	}
	return c.measure(ctx, ops, stderr)
}

// measure runs every op in a loop for the duration, with a progress line
// each second.
func (c *benchConfig) measure(ctx context.Context, ops []op, stderr io.Writer) (*benchResult, error) {
	// Calls run without the run's deadline (a deadline travels to the
	// server, which would fail the last calls); the loop stops on a flag.
	// A call still retrying then (a cluster client waiting for a leader)
	// is cancelled benchGrace later.
	var stop atomic.Bool
	timer := time.AfterFunc(c.duration, func() { stop.Store(true) })
	defer timer.Stop()
	context.AfterFunc(ctx, func() { stop.Store(true) })
	callCtx, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCalls()
	grace := time.AfterFunc(c.duration+benchGrace, cancelCalls)
	defer grace.Stop()
	var (
		nops, nmsgs, nerr atomic.Int64
		wg                sync.WaitGroup
		lat               = make([][]sample, len(ops))
		errAt             = make([][]time.Duration, len(ops))
		firstErr          atomic.Value
	)
	stopCPU := c.cpu.start(ctx)
	start := time.Now()
	for w, o := range ops {
		wg.Add(1)
		go func(w int, o op) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			for !stop.Load() {
				t := time.Now()
				n, err := o(callCtx, r)
				if err != nil {
					nerr.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					errAt[w] = append(errAt[w], time.Since(start))
					continue
				}
				lat[w] = append(lat[w], sample{at: time.Since(start), d: time.Since(t)})
				nops.Add(1)
				nmsgs.Add(int64(n))
			}
		}(w, o)
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var last int64
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				n := nops.Load()
				fmt.Fprintf(stderr, "\r%5.0fs  %8d ops/s  %8d ops  %d errors   ", time.Since(start).Seconds(), n-last, n, nerr.Load())
				last = n
			}
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	cpuS, cpuOK := stopCPU()
	close(done)
	fmt.Fprintln(stderr)
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(stderr, "first error: %s\n", e)
	}
	res := c.result(slices.Concat(lat...), slices.Concat(errAt...), nops.Load(), nmsgs.Load(), nerr.Load(), elapsed)
	res.setCPU(cpuS, cpuOK)
	return res, nil
}

func (c *benchConfig) result(samples []sample, errAt []time.Duration, ops, msgs, errs int64, elapsed time.Duration) *benchResult {
	all := make([]time.Duration, len(samples))
	for i, s := range samples {
		all[i] = s.d
	}
	slices.Sort(all)
	pct := func(p float64) float64 { return percentileMS(all, p) }
	s := elapsed.Seconds()
	return &benchResult{
		Workload: c.workload, Concurrency: c.concurrency, DurationS: s, Ops: ops, Messages: msgs, Errors: errs,
		OpsPerSec: float64(ops) / s, MessagesPerSec: float64(msgs) / s,
		LatencyMS: map[string]float64{"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "p999": pct(0.999), "max": pct(1)},
		Timeline:  timeline(samples, errAt),
	}
}
