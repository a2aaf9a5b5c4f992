package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStatTicks(t *testing.T) {
	// Fields 3.. of a real /proc/<pid>/stat line; utime (14) = 1500, stime (15) = 230.
	tail := " S 1 1234 1234 0 -1 4194560 5000 0 0 0 1500 230 0 0 20 0 12 0 100 2000000 3000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
	for _, tc := range []struct {
		name, stat string
		want       uint64
		err        string
	}{
		{"plain", "1234 (nats-server)" + tail, 1730, ""},
		{"spaces and parens in comm", "1234 (a b) (c))" + tail, 1730, ""},
		{"trailing newline", "1234 (etcd)" + tail + "\n", 1730, ""},
		{"no comm", "1234 nats-server" + tail, 0, "no ')'"},
		{"truncated", "1234 (skald) S 1 2 3 4 5 6 7 8 9 10", 0, "fields after"},
		{"not a number", "1234 (skald) S 1 1234 1234 0 -1 4194560 5000 0 0 0 x 230 0", 0, "utime/stime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statTicks(tc.stat)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestProcTicksSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc:", err)
	}
	// The test process itself, after 50 ms of busy work: at least a tick.
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	if n, err := procTicks([]int{os.Getpid()}); err != nil || n == 0 {
		t.Fatalf("own process: %d ticks, %v", n, err)
	}
	if _, err := procTicks([]int{1 << 30}); err == nil {
		t.Fatal("a pid that does not exist must fail, not count as 0")
	}
}

func TestParsePIDs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"11,12,13", []int{11, 12, 13}, true},
		{"11 12\n13\n", []int{11, 12, 13}, true},
		{"", nil, false},
		{"11,x", nil, false},
		{"0", nil, false},
	} {
		got, err := parsePIDs(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("parsePIDs(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestUsPerOp(t *testing.T) {
	for _, tc := range []struct {
		ticks  uint64
		clk    int
		ops    int64
		wantUs float64
	}{
		{2000, 100, 100000, 200}, // 20 s of CPU over 100,000 ops
		{50, 100, 1000, 500},
		{2000, 1000, 100000, 20},
		{2000, 100, 0, 0},
		{2000, 0, 10, 0},
	} {
		if got := usPerOp(tc.ticks, tc.clk, tc.ops); got != tc.wantUs {
			t.Errorf("usPerOp(%d, %d, %d) = %v, want %v", tc.ticks, tc.clk, tc.ops, got, tc.wantUs)
		}
	}
}
