package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// cpuProfile builds a CPU profile whose samples are the given stacks
// (leaf first) with the given nanoseconds.
func cpuProfile(stacks map[string]int64) *profile.Profile {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}}
	fns := map[string]*profile.Function{}
	for stack, ns := range stacks {
		var locs []*profile.Location
		for _, name := range strings.Split(stack, ";") {
			fn := fns[name]
			if fn == nil {
				fn = &profile.Function{ID: uint64(len(fns) + 1), Name: name}
				fns[name] = fn
				p.Function = append(p.Function, fn)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: fn}}}
			p.Location = append(p.Location, loc)
			locs = append(locs, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{1, ns}})
	}
	return p
}

func TestSharesBucketsByFirstMatch(t *testing.T) {
	p := cpuProfile(map[string]int64{
		// the memtable insert under apply counts as the insert, not as apply logic
		"github.com/cockroachdb/pebble/v2/internal/arenaskl.(*Skiplist).findSplice;github.com/cockroachdb/pebble/v2.(*memTable).apply;github.com/skalddb/skald/fsm.(*Store).ApplyBatch": 400,
		"google.golang.org/protobuf/proto.Unmarshal;github.com/skalddb/skald/fsm.(*Store).ApplyBatch":                                                                                   100,
		// GC wins over anything below it
		"runtime.gcDrain;runtime.gcBgMarkWorker": 200,
		"github.com/hashicorp/raft-wal/segment.(*Writer).sync;github.com/hashicorp/raft-wal.(*WAL).StoreLogs;github.com/hashicorp/raft.(*Raft).dispatchLogs": 200,
		"main.unrelated": 100,
	})
	got, secs, err := shares(p, writePathBuckets)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"Pebble memtable inserts": 0.4, "apply logic (decode, validate, keys)": 0.1, "GC": 0.2, "Raft log store": 0.2, "other": 0.1}
	if len(got) != len(want) || secs != 1000e-9 {
		t.Fatalf("shares %v over %v s, want %v over 1e-6 s", got, secs, want)
	}
	for k, v := range want {
		if d := got[k] - v; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
	if _, _, err := shares(&profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space"}}}, writePathBuckets); err == nil {
		t.Error("an allocation profile was accepted as a CPU profile")
	}
}

func TestPrintBreakdown(t *testing.T) {
	nodes := []roleCPU{
		{leader: true, seconds: 2, share: map[string]float64{"Raft log store": 0.5, "GC": 0.5}},
		{seconds: 1, share: map[string]float64{"Raft log store": 1}},
		{seconds: 1, share: map[string]float64{"GC": 1}},
	}
	var b bytes.Buffer
	if err := printBreakdown(&b, nodes, 200); err != nil {
		t.Fatal(err)
	}
	// 200 µs per op over 4 CPU-seconds: the leader holds 100 (50 + 50), each
	// follower 50; the log store 50 on the leader, 25 per follower on average.
	for _, want := range []string{
		"| GC | 50 | 25 | 100 | 50 % |",
		"| Raft log store | 50 | 25 | 100 | 50 % |",
		"| **total** | 100 | 50 | 200 | |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	if err := printBreakdown(&b, nodes[1:], 200); err == nil {
		t.Error("no leader profile: want an error")
	}
}
