package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
	"github.com/skalddb/skald/rpc/gen/skald/v1/skaldv1connect"
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
`

type benchConfig struct {
	addrs       []string
	workload    string
	concurrency int
	duration    time.Duration
	batch       int
	payload     int
	streams     int
	consistency skaldv1.Consistency
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
	target := fs.String("target", "all", "which of --addr to call: all, leader or followers (from Cluster.Status)")
	plot := fs.String("plot", "", "also write throughput and latency per second to this HTML file")
	standard := fs.Bool("standard", false, "run the standard set (append x64, append-batch 100 x16, follower reads, mixed, subscribe) and print one table")
	if _, err := cf.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *standard {
		return runStandardBench(ctx, cf, *duration, *plot, stdout, stderr)
	}
	addrs, err := selectTargets(ctx, cf, strings.Split(cf.addr, ","), *target)
	if err != nil {
		return err
	}
	cfg := benchConfig{
		addrs: addrs, workload: *workload, concurrency: *concurrency, duration: *duration,
		batch: *batch, payload: *payload, streams: *streams, readRatio: *readRatio, rate: *rate,
		run: "b" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36),
		cpu: newCPUMeter(cf, strings.Split(cf.addr, ",")),
	}
	switch *consistency {
	case "linearizable":
		cfg.consistency = skaldv1.Consistency_CONSISTENCY_LINEARIZABLE
	case "session":
		cfg.consistency = skaldv1.Consistency_CONSISTENCY_SESSION
	case "local":
		cfg.consistency = skaldv1.Consistency_CONSISTENCY_LOCAL
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

// selectTargets keeps the leader or the followers among addrs, by the
// API addresses Cluster.Status reports.
func selectTargets(ctx context.Context, cf *clientFlags, addrs []string, target string) ([]string, error) {
	if target == "all" {
		return addrs, nil
	}
	if target != "leader" && target != "followers" {
		return nil, &exitError{exitUsage, fmt.Errorf("--target %q: want all, leader or followers", target)}
	}
	first := *cf
	first.addr = addrs[0]
	st, err := first.clients().cluster.Status(ctx, connect.NewRequest(&skaldv1.StatusRequest{}))
	if err != nil {
		return nil, apiError(err)
	}
	leaderAPI := ""
	for _, s := range st.Msg.Servers {
		if s.Id == st.Msg.LeaderId {
			leaderAPI = s.ApiAddress
		}
	}
	var out []string
	for _, a := range addrs {
		host := strings.TrimPrefix(strings.TrimPrefix(a, "http://"), "https://")
		if (host == leaderAPI) == (target == "leader") {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s among %v (leader at %q)", target, addrs, leaderAPI)
	}
	return out, nil
}

// runStandardBench runs the set the targets are stated for.
func runStandardBench(ctx context.Context, cf *clientFlags, d time.Duration, plot string, stdout, stderr io.Writer) error {
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
		cfg.consistency = skaldv1.Consistency_CONSISTENCY_LINEARIZABLE
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

// client returns an EventStore client of its own (its own connections)
// for node i, keeping up to idle connections open: as many as will be
// used at once, or every call past them dials a new one.
func (c *benchConfig) client(cf *clientFlags, i, idle int) skaldv1connect.EventStoreClient {
	return skaldv1connect.NewEventStoreClient(benchHTTPClient(cf, idle), c.url(i), connect.WithInterceptors(tokenInterceptor(cf.token)))
}

// url is the base URL of the node caller i calls.
func (c *benchConfig) url(i int) string {
	return (&clientFlags{addr: c.addrs[i%len(c.addrs)]}).baseURL()
}

// benchHTTPClient is an HTTP client of its own (its own connections)
// keeping up to idle connections open.
func benchHTTPClient(cf *clientFlags, idle int) *http.Client {
	hc := cf.httpClient()
	if tr, ok := hc.Transport.(*http.Transport); ok {
		tr.MaxIdleConnsPerHost = idle
	} else {
		hc.Transport = &http.Transport{MaxIdleConnsPerHost: idle}
	}
	return hc
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
func (c *benchConfig) fill(ctx context.Context, cl skaldv1connect.EventStoreClient, stderr io.Writer) error {
	r := rand.New(rand.NewPCG(1, 2))
	for s := 0; s < c.streams; s++ {
		msgs := make([]*skaldv1.NewMessage, 100)
		for i := range msgs {
			msgs[i] = &skaldv1.NewMessage{Type: "Filled", Data: c.payloadJSON(r)}
		}
		if _, err := cl.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: c.stream(s), Messages: msgs})); err != nil {
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
	if c.workload == "subscribe" {
		return c.subscribe(ctx, cf, stderr)
	}
	if c.workload == "read-stream" || c.workload == "read-category" || c.workload == "mixed" {
		if err := c.fill(ctx, c.client(cf, 0, 1), stderr); err != nil {
			return nil, err
		}
	}
	ops := make([]op, c.concurrency)
	for w := range ops {
		cl := c.client(cf, w, 1)
		w := w
		appendN := func(n int) op {
			return func(ctx context.Context, r *rand.Rand) (int, error) {
				msgs := make([]*skaldv1.NewMessage, n)
				for i := range msgs {
					msgs[i] = &skaldv1.NewMessage{Type: "Bench", Data: c.payloadJSON(r)}
				}
				_, err := cl.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: c.stream(r.IntN(c.streams)), Messages: msgs}))
				return n, err
			}
		}
		readStream := func(ctx context.Context, r *rand.Rand) (int, error) {
			resp, err := cl.ReadStream(ctx, connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: c.stream(r.IntN(c.streams)), Limit: 100,
				Read: &skaldv1.ReadOptions{Consistency: c.consistency}}))
			if err != nil {
				return 0, err
			}
			return len(resp.Msg.Messages), nil
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
				resp, err := cl.ReadCategory(ctx, connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: c.run, Limit: 100,
					GlobalPosition: 1 + r.Int64N(int64(c.streams)*50), ConsumerGroup: &skaldv1.ConsumerGroup{Member: int64(w % 4), Size: 4},
					Read: &skaldv1.ReadOptions{Consistency: c.consistency}}))
				if err != nil {
					return 0, err
				}
				return len(resp.Msg.Messages), nil
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
	var stop atomic.Bool
	timer := time.AfterFunc(c.duration, func() { stop.Store(true) })
	defer timer.Stop()
	context.AfterFunc(ctx, func() { stop.Store(true) })
	callCtx := context.WithoutCancel(ctx)
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

// subscribe measures delivery latency: appends at --rate on the first node
// carry their send time; a subscriber on the last node measures arrival.
func (c *benchConfig) subscribe(ctx context.Context, cf *clientFlags, stderr io.Writer) (*benchResult, error) {
	writer, reader := c.client(cf, 0, c.concurrency), c.client(cf, len(c.addrs)-1, 1)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := reader.Subscribe(sctx, connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Category{Category: c.run}}))
	if err != nil {
		return nil, apiError(err)
	}
	defer st.Close()
	if !st.Receive() || st.Msg().GetCaughtUp() == nil {
		return nil, fmt.Errorf("subscribe: no caught_up: %v", st.Err())
	}
	var (
		mu  sync.Mutex
		lat []sample
	)
	start := time.Now()
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for st.Receive() {
			if m := st.Msg().GetMessage(); m != nil {
				var p struct{ T int64 }
				if json.Unmarshal(m.Data, &p) == nil {
					mu.Lock()
					lat = append(lat, sample{at: time.Since(start), d: time.Since(time.Unix(0, p.T))})
					mu.Unlock()
				}
			}
		}
	}()
	stopCPU := c.cpu.start(ctx)
	interval := time.Second / time.Duration(max(c.rate, 1))
	sent, errs := int64(0), int64(0)
	wctx, wcancel := context.WithTimeout(ctx, c.duration)
	defer wcancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.concurrency)
	for next := time.Now(); wctx.Err() == nil; next = next.Add(interval) {
		time.Sleep(time.Until(next))
		sem <- struct{}{}
		wg.Add(1)
		go func(i int64) {
			defer func() { <-sem; wg.Done() }()
			data := fmt.Appendf(nil, `{"T":%d}`, time.Now().UnixNano())
			if _, err := writer.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: c.stream(int(i)), Messages: []*skaldv1.NewMessage{{Type: "Tick", Data: data}}})); err != nil {
				atomic.AddInt64(&errs, 1)
			}
		}(sent)
		sent++
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := int64(len(lat))
		mu.Unlock()
		if n >= sent-atomic.LoadInt64(&errs) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cpuS, cpuOK := stopCPU()
	cancel()
	<-recvDone
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(stderr, "sent %d appends at %d/s, %d delivered on %s\n", sent, c.rate, len(lat), c.addrs[len(c.addrs)-1])
	res := c.result(lat, nil, int64(len(lat)), int64(len(lat)), errs, time.Since(start))
	res.setCPU(cpuS, cpuOK)
	return res, nil
}
