package server

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestParseCgroupLimit(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"536870912\n", 512 << 20, true},
		{"max\n", 0, false},                 // cgroup v2: no limit
		{"9223372036854771712\n", 0, false}, // cgroup v1: no limit
		{"0\n", 0, false},
		{"", 0, false},
	}
	for _, tc := range cases {
		got, ok := parseCgroupLimit(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseCgroupLimit(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseMemTotal(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"MemTotal:       24576000 kB\nMemFree:  1 kB\n", 24576000 << 10, true},
		{"MemFree:  1 kB\nMemTotal: 2048 kB\n", 2048 << 10, true},
		{"MemFree:  1 kB\n", 0, false},
		{"MemTotal: lots kB\n", 0, false},
	}
	for _, tc := range cases {
		got, ok := parseMemTotal(strings.NewReader(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseMemTotal(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestApplyGCSettings(t *testing.T) {
	prevPercent, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(prevPercent); debug.SetMemoryLimit(prevLimit) })
	noEnv := func(string) string { return "" }
	mem := func(n uint64, ok bool) func() (uint64, bool) { return func() (uint64, bool) { return n, ok } }
	cases := []struct {
		name        string
		percent     int
		limit       uint64
		env         func(string) string
		total       func() (uint64, bool)
		wantPercent int
		wantLimit   int64
	}{
		{"defaults: 75% of memory", 400, 0, noEnv, mem(8<<30, true), 400, 6 << 30},
		{"explicit limit", 250, 1 << 30, noEnv, mem(8<<30, true), 250, 1 << 30},
		{"memory unknown: no limit", 400, 0, noEnv, mem(0, false), 400, math.MaxInt64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := applyGCSettings(tc.percent, tc.limit, tc.env, tc.total)
			if s.percent != tc.wantPercent || s.limit != tc.wantLimit {
				t.Fatalf("settings %+v, want percent %d limit %d", s, tc.wantPercent, tc.wantLimit)
			}
			if got := debug.SetGCPercent(100); got != tc.wantPercent {
				t.Fatalf("runtime GC percent %d, want %d", got, tc.wantPercent)
			}
			if got := debug.SetMemoryLimit(math.MaxInt64); got != tc.wantLimit {
				t.Fatalf("runtime memory limit %d, want %d", got, tc.wantLimit)
			}
		})
	}
	t.Run("GOGC and GOMEMLIMIT win", func(t *testing.T) {
		debug.SetGCPercent(150) // as the runtime would have from GOGC=150
		debug.SetMemoryLimit(3 << 30)
		env := func(k string) string { return map[string]string{"GOGC": "150", "GOMEMLIMIT": "3GiB"}[k] }
		s := applyGCSettings(400, 1<<30, env, mem(8<<30, true))
		if s.percent != 150 || s.percentFrom != "GOGC" || s.limit != 3<<30 || s.limitFrom != "GOMEMLIMIT" {
			t.Fatalf("settings %+v, want the environment's 150 and 3 GiB", s)
		}
		if got := debug.SetGCPercent(100); got != 150 {
			t.Fatalf("runtime GC percent %d, want 150", got)
		}
	})
}
