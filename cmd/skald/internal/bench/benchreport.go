package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// What bench prints: the result of a run, as a table or JSON.

// Result is what -o json prints.
type Result struct {
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
	// Slowest lists the run's slowest calls (benchSlowest of them) with
	// the time each was sent, to find what the servers logged then; absent
	// for subscribe and consume, whose latency is a delivery's.
	Slowest []slowCall `json:"slowest,omitempty"`
	// Server CPU over the measured window, summed over every --addr node;
	// absent when /metrics could not be read. See cpuMeter.
	ServerCPUSeconds  float64 `json:"server_cpu_s,omitempty"`
	ServerCPUUsPerOp  float64 `json:"server_cpu_us_per_op,omitempty"`
	ServerCPUUsPerMsg float64 `json:"server_cpu_us_per_msg,omitempty"`
	// --index: every target node's lag on the run's index, sampled at
	// LOCAL (benchindex.go): p50, p99 and max of the age of the oldest
	// event not indexed yet, the samples, and the most events behind.
	IndexLagMS        map[string]float64 `json:"index_lag_ms,omitempty"`
	IndexLagSamples   int                `json:"index_lag_samples,omitempty"`
	IndexLagEventsMax int64              `json:"index_lag_events_max,omitempty"`
}

// setCPU records the servers' CPU seconds over the run, when measured.
func (r *Result) setCPU(seconds float64, ok bool) {
	if !ok || r.Ops == 0 {
		return
	}
	r.ServerCPUSeconds = seconds
	r.ServerCPUUsPerOp = seconds * 1e6 / float64(r.Ops)
	if r.Messages > 0 {
		r.ServerCPUUsPerMsg = seconds * 1e6 / float64(r.Messages)
	}
}

// benchReport prints the results as a table or JSON (one object for one
// result) and writes the plot when asked.
func benchReport(stdout, stderr io.Writer, output, plot string, results []*Result, targets []string) error {
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

func benchTable(w io.Writer, results []*Result, targets []string) error {
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
	return command.Table(w, "WORKLOAD\tNODES\tCONC\tOPS/S\tMSGS/S\tP50 MS\tP90 MS\tP99 MS\tP99.9 MS\tMAX MS\tERRORS\tCPU µS/OP", rows)
}
