// Command etcd holds the other systems' sides of `make bench-compare`. `put`
// drives puts against an etcd cluster and `nats` synchronous publishes
// against a NATS JetStream cluster the way `skald bench --workload append`
// drives single-message appends (same concurrency, same value size, same
// number of keys/subjects/streams, closed loop, one request outstanding per
// caller) and print the same JSON, so the three compare line by line.
// `measure` wraps any of the three drivers and adds the CPU the server
// processes spent, read from /proc the same way for all; `compare` prints
// the three and Skald's ratios. It lives in its own module so the product
// depends on neither etcd's nor NATS's client.
//
//	go run . put --endpoints 127.0.0.1:2379,... --concurrency 64 --value-bytes 200 --duration 10s
//	go run . nats --servers nats://127.0.0.1:4221,... --concurrency 64 --value-bytes 200 --duration 10s
//	go run . measure --pids 11,12,13 --clk-tck 100 -- ./driver ...
//	go run . compare etcd.json nats.json skald.json
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// result has the fields of skald bench -o json that compare reads.
type result struct {
	Workload    string             `json:"workload"`
	Concurrency int                `json:"concurrency"`
	DurationS   float64            `json:"duration_s"`
	Ops         int64              `json:"ops"`
	Errors      int64              `json:"errors"`
	OpsPerSec   float64            `json:"ops_per_sec"`
	LatencyMS   map[string]float64 `json:"latency_ms"`
	// CPU the servers used per operation, summed over the cluster, from
	// process_cpu_seconds_total on each member's /metrics: unlike ops/s it
	// barely moves when the machine's CPUs are stolen by neighbours.
	ServerCPUUsPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
	// The same from /proc/<pid>/stat of the server processes, added by
	// `measure`: one method for every system, NATS included.
	ServerCPUProcUsPerOp float64 `json:"server_cpu_proc_us_per_op,omitempty"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: etcd put [flags] | nats [flags] | measure --pids P,... -- COMMAND... | compare ETCD.json NATS.json SKALD.json [SKALD-EVENTODB.json] | breakdown --per-op US --leader L.pprof F.pprof...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "put":
		err = put(os.Args[2:])
	case "nats":
		err = publish(os.Args[2:])
	case "measure":
		err = measure(os.Args[2:])
	case "compare":
		err = compare(os.Args[2:])
	case "breakdown":
		err = breakdown(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func put(args []string) error {
	fs := flag.NewFlagSet("put", flag.ContinueOnError)
	endpoints := fs.String("endpoints", "127.0.0.1:2379", "comma-separated client URLs or host:port")
	concurrency := fs.Int("concurrency", 64, "concurrent callers (each has one put outstanding)")
	valueBytes := fs.Int("value-bytes", 200, "bytes per value")
	keys := fs.Int("keys", 1000, "distinct keys the puts spread over")
	duration := fs.Duration("duration", 10*time.Second, "how long to measure")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	value := strings.Repeat("x", *valueBytes)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = cli.Put(ctx, "bench-warmup", value)
	cancel()
	if err != nil {
		return fmt.Errorf("first put: %w", err)
	}

	cpu0, cpuErr := clusterCPU(strings.Split(*endpoints, ","))
	run := closedLoop(*concurrency, *duration, func(int) (func(context.Context, *rand.Rand) error, error) {
		return func(ctx context.Context, rng *rand.Rand) error {
			_, err := cli.Put(ctx, fmt.Sprintf("bench/%d", rng.IntN(*keys)), value)
			return err
		}, nil
	})
	elapsed := run.elapsed.Seconds()
	res := result{Workload: "etcd-put", Concurrency: *concurrency, DurationS: elapsed, Ops: run.ops, Errors: run.errs,
		OpsPerSec: float64(run.ops) / elapsed, LatencyMS: quantiles(run.lat)}
	if cpu1, err := clusterCPU(strings.Split(*endpoints, ",")); err == nil && cpuErr == nil && res.Ops > 0 {
		res.ServerCPUUsPerOp = (cpu1 - cpu0) * 1e6 / float64(res.Ops)
	} else {
		fmt.Fprintln(os.Stderr, "etcd bench: server CPU not measured:", errors.Join(cpuErr, err))
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func quantiles(lat []time.Duration) map[string]float64 {
	out := map[string]float64{}
	if len(lat) == 0 {
		return out
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	at := func(q float64) float64 {
		i := min(int(q*float64(len(lat))), len(lat)-1)
		return float64(lat[i].Microseconds()) / 1000
	}
	out["p50"], out["p90"], out["p99"], out["p999"] = at(0.50), at(0.90), at(0.99), at(0.999)
	out["max"] = float64(lat[len(lat)-1].Microseconds()) / 1000
	return out
}

// clusterCPU sums process_cpu_seconds_total over the members' /metrics.
func clusterCPU(endpoints []string) (float64, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	var sum float64
	for _, ep := range endpoints {
		url := ep
		if !strings.Contains(url, "://") {
			url = "http://" + url
		}
		resp, err := hc.Get(url + "/metrics")
		if err != nil {
			return 0, err
		}
		v, err := cpuSeconds(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("%s/metrics: %w", url, err)
		}
		sum += v
	}
	return sum, nil
}

func cpuSeconds(r io.Reader) (float64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no process_cpu_seconds_total")
}
