package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		name         string
		what         string
		skald, other float64
		higherBetter bool
		goal         float64
		want         string
	}{
		{"cpu worse", "CPU per op", 264, 200, false, 0.5, "CPU per op 1.32x etcd's (etcd better; target <= 0.5x missed)"},
		{"cpu better", "CPU per op", 90, 200, false, 0.5, "CPU per op 0.45x etcd's (Skald better; target <= 0.5x met)"},
		{"throughput worse", "throughput", 3600, 5000, true, 2, "throughput 0.72x etcd's (etcd better; target >= 2x missed)"},
		{"throughput better", "throughput", 10000, 5000, true, 2, "throughput 2.00x etcd's (Skald better; target >= 2x met)"},
		{"even", "p99", 10.001, 10, false, 1, "p99 1.00x etcd's (even; target <= 1x met)"},
		{"no target", "throughput", 5000, 10000, true, 0, "throughput 0.50x etcd's (etcd better)"},
		{"missing", "CPU per op", 0, 200, false, 0.5, "CPU per op n/a"},
		{"missing other", "CPU per op", 200, 0, false, 0.5, "CPU per op n/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ratio(tc.what, tc.skald, tc.other, tc.higherBetter, "etcd", tc.goal); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestPrintComparison(t *testing.T) {
	lat := func(p50, p99, p999 float64) map[string]float64 {
		return map[string]float64{"p50": p50, "p99": p99, "p999": p999}
	}
	etcd := side{"etcd", "put", result{Concurrency: 64, OpsPerSec: 5000, LatencyMS: lat(11, 30, 40), ServerCPUUsPerOp: 280, ServerCPUProcUsPerOp: 284}}
	nats := side{"NATS", "JetStream publish", result{Concurrency: 64, OpsPerSec: 13000, LatencyMS: lat(4, 9.5, 20), ServerCPUProcUsPerOp: 94}}
	skald := side{"Skald", "Connect append", result{Concurrency: 64, OpsPerSec: 3600, LatencyMS: lat(16, 39, 941), ServerCPUUsPerOp: 380, ServerCPUProcUsPerOp: 387}}
	evdb := side{"Skald", "EventoDB stream.write", result{Concurrency: 64, OpsPerSec: 12800, LatencyMS: lat(4, 9, 0), ServerCPUUsPerOp: 95, ServerCPUProcUsPerOp: 96}}
	var b bytes.Buffer
	printComparison(&b, etcd, nats, []side{skald, evdb}, map[string]target{"etcd": {throughputMin: 2, cpuMax: 0.5, p99Max: 1}, "NATS": {cpuMax: 1}})
	out := b.String()
	for _, want := range []string{
		"etcd put x64", "NATS JetStream publish x64", "Skald Connect append x64", "Skald EventoDB stream.write x64",
		"/proc/<pid>/stat",
		"Skald Connect append vs etcd: throughput 0.72x etcd's (etcd better; target >= 2x missed); CPU per op 1.36x etcd's (etcd better; target <= 0.5x missed); p99 1.30x etcd's (etcd better; target <= 1x missed); p99.9 23.53x etcd's (etcd better)",
		"Skald Connect append vs NATS: throughput 0.28x NATS's (NATS better); CPU per op 4.12x NATS's (NATS better; target <= 1x missed); p99 4.11x NATS's (NATS better); p99.9 47.05x NATS's (NATS better)",
		"Skald EventoDB stream.write vs etcd: throughput 2.56x etcd's (Skald better; target >= 2x met); CPU per op 0.34x etcd's (Skald better; target <= 0.5x met); p99 0.30x etcd's (Skald better; target <= 1x met); p99.9 n/a",
		"Skald EventoDB stream.write vs NATS: throughput 0.98x NATS's (NATS better); CPU per op 1.02x NATS's (NATS better; target <= 1x missed); p99 0.95x NATS's (Skald better); p99.9 n/a",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// NATS has no /metrics CPU: n/a, not 0.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "NATS JetStream") && !strings.HasSuffix(strings.TrimSpace(line), "n/a") {
			t.Errorf("NATS row should end in n/a: %q", line)
		}
	}
}
