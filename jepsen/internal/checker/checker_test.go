package checker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skalddb/skald/jepsen/internal/history"
)

// hist builds hand-written histories: each call adds an invocation at
// call and a completion at ret.
type hist struct{ ops []history.Op }

func (h *hist) op(proc int, f string, call, ret int64, t history.Type, v history.Value, r *history.Result) {
	h.ops = append(h.ops, history.Op{Index: len(h.ops), Time: call, Process: proc, Type: history.Invoke, F: f, Node: "n1", Value: v})
	h.ops = append(h.ops, history.Op{Index: len(h.ops), Time: ret, Process: proc, Type: t, F: f, Node: "n1", Value: v, Result: r})
}

func (h *hist) append(proc int, stream, id string, exp *int64, call, ret int64, t history.Type, pos, global int64, index uint64) {
	var r *history.Result
	if t == history.OK {
		r = &history.Result{Pos: pos, Global: global, Index: index}
	}
	h.op(proc, history.FAppend, call, ret, t, history.Value{Stream: stream, IDs: []string{id}, Expected: exp}, r)
}

func (h *hist) conflict(proc int, stream, id string, exp, actual int64, call, ret int64) {
	h.op(proc, history.FAppend, call, ret, history.Fail, history.Value{Stream: stream, IDs: []string{id}, Expected: &exp}, &history.Result{Actual: &actual})
}

func (h *hist) readStream(proc int, stream, consistency string, minIndex uint64, call, ret int64, evs ...history.Event) {
	h.op(proc, history.FReadStream, call, ret, history.OK, history.Value{Stream: stream, Consistency: consistency, MinIndex: minIndex, Limit: 100}, &history.Result{Events: evs})
}

func (h *hist) readCategory(proc int, cat string, from int64, call, ret int64, evs ...history.Event) {
	h.op(proc, history.FReadCategory, call, ret, history.OK, history.Value{Category: cat, From: from, Consistency: history.Linearizable, Limit: 100}, &history.Result{Events: evs})
}

func (h *hist) version(proc int, stream string, call, ret int64, v int64) {
	h.op(proc, history.FVersion, call, ret, history.OK, history.Value{Stream: stream, Consistency: history.Linearizable}, &history.Result{Version: v})
}

func ev(id, stream string, pos, global int64) history.Event {
	return history.Event{ID: id, Stream: stream, Pos: pos, Global: global}
}

func ptr(v int64) *int64 { return &v }

// decide is a conditional append of the dcb workload: one message with
// tags (comma-joined) to a course stream, on condition that nothing with
// any of them came after after.
func (h *hist) decide(proc int, id, tags string, after, call, ret int64, t history.Type, global int64, index uint64) {
	var r *history.Result
	if t == history.OK {
		r = &history.Result{Pos: 0, Global: global, Index: index}
	}
	tt := strings.Split(tags, ",")
	h.op(proc, history.FAppend, call, ret, t, history.Value{Stream: "course-" + id, IDs: []string{id}, Tags: tt,
		Condition: &history.Condition{AnyTags: tt, After: after}}, r)
}

func (h *hist) decideFailed(proc int, id, tags string, after, match, call, ret int64) {
	tt := strings.Split(tags, ",")
	h.op(proc, history.FAppend, call, ret, history.Fail, history.Value{Stream: "course-" + id, IDs: []string{id}, Tags: tt,
		Condition: &history.Condition{AnyTags: tt, After: after}}, &history.Result{Match: match})
}

// tev is the final log's event of a decision.
func tev(id string, global int64, tags string) history.Event {
	return history.Event{ID: id, Stream: "course-" + id, Pos: 0, Global: global, Tags: tags}
}

var (
	a0 = ev("a0", "acct-1", 0, 1)
	a1 = ev("a1", "acct-1", 1, 2)
	b0 = ev("b0", "acct-2", 0, 3)
)

// good is a valid history of ten appends and some reads; cases mutate it.
func good() (*hist, []history.Event) {
	h := &hist{}
	h.append(1, "acct-1", "a0", ptr(-1), 10, 20, history.OK, 0, 1, 5)
	h.append(2, "acct-1", "a1", nil, 30, 40, history.OK, 1, 2, 6)
	h.append(1, "acct-2", "b0", nil, 50, 60, history.OK, 0, 3, 7)
	final := []history.Event{a0, a1, b0}
	for i := range 7 {
		id := string(rune('c'+i)) + "0"
		h.append(3, "other-"+id, id, nil, int64(100+20*i), int64(110+20*i), history.OK, 0, int64(4+i), uint64(8+i))
		final = append(final, ev(id, "other-"+id, 0, int64(4+i)))
	}
	h.readStream(2, "acct-1", history.Linearizable, 0, 70, 80, a0, a1)
	h.readCategory(4, "acct", 0, 75, 85, a0, a1, b0)
	h.version(4, "acct-1", 90, 95, 1)
	return h, final
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(h *hist, final []history.Event) []history.Event
		want    any    // Valid
		anomaly string // expected anomaly kind when invalid
	}{
		{name: "good", want: true},
		{name: "lost", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 310, history.OK, 0, 11, 20)
			return f
		}, want: false, anomaly: "lost"},
		{name: "indeterminate absent is fine", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 310, history.Info, 0, 0, 0)
			return f
		}, want: true},
		{name: "indeterminate present is fine", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 310, history.Info, 0, 0, 0)
			return append(f, ev("x0", "acct-3", 0, 11))
		}, want: true},
		{name: "phantom", mutate: func(h *hist, f []history.Event) []history.Event {
			h.conflict(5, "acct-3", "x0", 4, -1, 300, 310)
			return append(f, ev("x0", "acct-3", 0, 11))
		}, want: false, anomaly: "phantom"},
		{name: "unexpected", mutate: func(h *hist, f []history.Event) []history.Event {
			return append(f, ev("zz", "acct-3", 0, 11))
		}, want: false, anomaly: "unexpected"},
		{name: "duplicate", mutate: func(h *hist, f []history.Event) []history.Event {
			return append(f, ev("a0", "acct-1", 2, 11))
		}, want: false, anomaly: "duplicate"},
		{name: "ack mismatch", mutate: func(h *hist, f []history.Event) []history.Event {
			h.ops[3].Result = &history.Result{Pos: 1, Global: 7, Index: 6}
			return f
		}, want: false, anomaly: "ack-mismatch"},
		{name: "stream gap", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 310, history.OK, 1, 11, 20)
			return append(f, ev("x0", "acct-3", 1, 11))
		}, want: false, anomaly: "stream-gap"},
		{name: "global gap", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 310, history.OK, 0, 12, 20)
			return append(f, ev("x0", "acct-3", 0, 12))
		}, want: false, anomaly: "global-gap"},
		{name: "stream read out of order", mutate: func(h *hist, f []history.Event) []history.Event {
			h.readStream(6, "acct-1", history.Local, 0, 300, 310, a1, a0)
			return f
		}, want: false, anomaly: "incompatible-order"},
		{name: "category hole", mutate: func(h *hist, f []history.Event) []history.Event {
			h.readCategory(6, "acct", 0, 300, 310, a0, b0)
			return f
		}, want: false, anomaly: "category-hole"},
		{name: "category foreign", mutate: func(h *hist, f []history.Event) []history.Event {
			h.readCategory(6, "other", 0, 300, 310, a0)
			return f
		}, want: false, anomaly: "category-foreign"},
		{name: "stale category read", mutate: func(h *hist, f []history.Event) []history.Event {
			h.readCategory(6, "acct", 0, 300, 310, a0, a1)
			return f
		}, want: false, anomaly: "stale-read"},
		{name: "future read", mutate: func(h *hist, f []history.Event) []history.Event {
			h.readStream(6, "acct-3", history.Linearizable, 0, 300, 305, ev("x0", "acct-3", 0, 11))
			h.append(5, "acct-3", "x0", nil, 306, 310, history.OK, 0, 11, 20)
			return append(f, ev("x0", "acct-3", 0, 11))
		}, want: false, anomaly: "future-read"},
		{name: "stale stream read", mutate: func(h *hist, f []history.Event) []history.Event {
			h.readStream(6, "acct-1", history.Linearizable, 0, 300, 310, a0)
			return f
		}, want: false, anomaly: "stale-read"},
		{name: "stale local read is allowed", mutate: func(h *hist, f []history.Event) []history.Event {
			h.readStream(6, "acct-1", history.Local, 0, 300, 310, a0)
			return f
		}, want: true},
		{name: "stale version read", mutate: func(h *hist, f []history.Event) []history.Event {
			h.version(6, "acct-1", 300, 310, 0)
			return f
		}, want: false, anomaly: "linearizability"},
		{name: "ryw violation", mutate: func(h *hist, f []history.Event) []history.Event {
			h.readStream(6, "acct-1", history.Session, 6, 300, 310, a0)
			return f
		}, want: false, anomaly: "ryw-violation"},
		{name: "ryw below token", mutate: func(h *hist, f []history.Event) []history.Event {
			h.readStream(6, "acct-1", history.Session, 5, 300, 310, a0)
			return f
		}, want: true},
		{name: "cas double success", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", ptr(-1), 300, 310, history.OK, 0, 11, 20)
			h.append(6, "acct-3", "x1", ptr(-1), 300, 310, history.OK, 1, 12, 21)
			return append(f, ev("x0", "acct-3", 0, 11), ev("x1", "acct-3", 1, 12))
		}, want: false, anomaly: "cas-double-success"},
		{name: "cas conflict consistent", mutate: func(h *hist, f []history.Event) []history.Event {
			h.conflict(5, "acct-1", "x0", -1, 1, 300, 310)
			return f
		}, want: true},
		{name: "cas conflict wrong actual", mutate: func(h *hist, f []history.Event) []history.Event {
			h.conflict(5, "acct-1", "x0", 0, 0, 300, 310)
			return f
		}, want: false, anomaly: "linearizability"},
		{name: "realtime order", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 310, history.OK, 0, 12, 20)
			h.append(6, "acct-4", "x1", nil, 320, 330, history.OK, 0, 11, 21)
			return append(f, ev("x1", "acct-4", 0, 11), ev("x0", "acct-3", 0, 12))
		}, want: false, anomaly: "realtime-order"},
		{name: "observed then lost", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 400, history.Info, 0, 0, 0)
			h.readStream(6, "acct-3", history.Local, 0, 310, 320, ev("x0", "acct-3", 0, 11))
			return f
		}, want: false, anomaly: "observed-then-lost"},
		// DCB: conditional appends replayed against the final log.
		{name: "dcb decisions in turn", mutate: func(h *hist, f []history.Event) []history.Event {
			h.decide(5, "z0", "course:c1,student:s1", 10, 300, 310, history.OK, 11, 20)
			h.decide(6, "z1", "course:c1,student:s2", 11, 320, 330, history.OK, 12, 21)
			h.decideFailed(7, "z2", "course:c1,student:s1", 10, 11, 340, 350)
			return append(f, tev("z0", 11, "course:c1,student:s1"), tev("z1", 12, "course:c1,student:s2"))
		}, want: true},
		{name: "dcb conflict", mutate: func(h *hist, f []history.Event) []history.Event {
			// Both read up to 10; z1 shares course:c1 with z0, which came first.
			h.decide(5, "z0", "course:c1,student:s1", 10, 300, 310, history.OK, 11, 20)
			h.decide(6, "z1", "course:c1,student:s2", 10, 300, 310, history.OK, 12, 21)
			return append(f, tev("z0", 11, "course:c1,student:s1"), tev("z1", 12, "course:c1,student:s2"))
		}, want: false, anomaly: "dcb-conflict"},
		{name: "dcb conflict with an unacknowledged write", mutate: func(h *hist, f []history.Event) []history.Event {
			h.decide(5, "z0", "course:c1,student:s1", 10, 300, 400, history.Info, 0, 0)
			h.decide(6, "z1", "student:s1,course:c2", 10, 300, 310, history.OK, 12, 21)
			return append(f, tev("z0", 11, "course:c1,student:s1"), tev("z1", 12, "student:s1,course:c2"))
		}, want: false, anomaly: "dcb-conflict"},
		{name: "dcb unrelated decisions", mutate: func(h *hist, f []history.Event) []history.Event {
			h.decide(5, "z0", "course:c1,student:s1", 10, 300, 310, history.OK, 11, 20)
			h.decide(6, "z1", "course:c2,student:s2", 10, 300, 310, history.OK, 12, 21)
			return append(f, tev("z0", 11, "course:c1,student:s1"), tev("z1", 12, "course:c2,student:s2"))
		}, want: true},
		{name: "dcb false failure", mutate: func(h *hist, f []history.Event) []history.Event {
			h.decideFailed(7, "z2", "course:c1,student:s1", 10, 9, 340, 350)
			return f
		}, want: false, anomaly: "dcb-false-failure"},
		// Idempotent writes: attempts of one append carry the same ids.
		{name: "retry after unknown acknowledged as duplicate", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 310, history.Info, 0, 0, 0)
			h.append(6, "acct-3", "x0", nil, 320, 330, history.OK, 0, 11, 20)
			h.ops[len(h.ops)-1].Result.Duplicate = true
			// A write acknowledged in between does not make the retry's
			// earlier global position a realtime-order violation: the
			// append began with its first attempt.
			h.append(7, "acct-4", "x1", nil, 312, 315, history.OK, 0, 12, 21)
			return append(f, ev("x0", "acct-3", 0, 11), ev("x1", "acct-4", 0, 12))
		}, want: true},
		{name: "hedged attempts both acknowledged alike", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 320, history.OK, 0, 11, 20)
			h.append(6, "acct-3", "x0", nil, 300, 330, history.OK, 0, 11, 21)
			h.ops[len(h.ops)-1].Result.Duplicate = true
			return append(f, ev("x0", "acct-3", 0, 11))
		}, want: true},
		{name: "retry written twice", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 310, history.Info, 0, 0, 0)
			h.append(6, "acct-3", "x0", nil, 320, 330, history.OK, 1, 12, 20)
			return append(f, ev("x0", "acct-3", 0, 11), ev("x0", "acct-3", 1, 12))
		}, want: false, anomaly: "duplicate"},
		{name: "retry acknowledged elsewhere", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 320, history.OK, 0, 11, 20)
			h.append(6, "acct-3", "x0", nil, 300, 330, history.OK, 1, 12, 21)
			return append(f, ev("x0", "acct-3", 0, 11))
		}, want: false, anomaly: "retry-mismatch"},
		{name: "duplicate of nothing", mutate: func(h *hist, f []history.Event) []history.Event {
			h.append(5, "acct-3", "x0", nil, 300, 320, history.OK, 0, 11, 20)
			h.append(6, "acct-3", "x0", nil, 300, 330, history.OK, 0, 11, 21)
			h.ops[len(h.ops)-3].Result.Duplicate = true
			h.ops[len(h.ops)-1].Result.Duplicate = true
			return append(f, ev("x0", "acct-3", 0, 11))
		}, want: false, anomaly: "phantom-duplicate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, final := good()
			if tc.mutate != nil {
				final = tc.mutate(h, final)
			}
			res := Check(Input{Ops: h.ops, Final: map[string][]history.Event{"n1": final, "n2": final}, Nodes: []string{"n1", "n2"}}, Options{})
			if res.Valid != tc.want {
				t.Fatalf("valid = %v, want %v; anomalies %v, examples %+v, unknown %v", res.Valid, tc.want, res.Anomalies, res.Examples, res.Unknown)
			}
			if tc.anomaly != "" && res.Anomalies[tc.anomaly] == 0 {
				t.Fatalf("anomalies %v, want %s", res.Anomalies, tc.anomaly)
			}
		})
	}
}

func TestCheckDivergenceAndUnknown(t *testing.T) {
	h, final := good()
	other := append([]history.Event(nil), final...)
	other[3], other[4] = other[4], other[3]
	res := Check(Input{Ops: h.ops, Final: map[string][]history.Event{"n1": final, "n2": other}, Nodes: []string{"n1", "n2"}}, Options{})
	if res.Valid != false || res.Anomalies["divergence"] == 0 {
		t.Fatalf("diverged nodes: valid %v anomalies %v", res.Valid, res.Anomalies)
	}
	res = Check(Input{Ops: h.ops, Final: map[string][]history.Event{"n1": final}, Nodes: []string{"n1", "n2"}}, Options{})
	if res.Valid != "unknown" {
		t.Fatalf("a node without a final log: valid %v, want unknown", res.Valid)
	}
	res = Check(Input{Ops: h.ops[:4], Final: map[string][]history.Event{"n1": final[:2]}, Nodes: []string{"n1"}}, Options{})
	if res.Valid != "unknown" || len(res.Unknown) == 0 {
		t.Fatalf("two appends: valid %v (%v), want unknown", res.Valid, res.Unknown)
	}
}

func (h *hist) truncate(proc int, stream string, before int64, call, ret int64, t history.Type) {
	var r *history.Result
	if t == history.OK {
		r = &history.Result{Version: 2, Index: 30}
	}
	h.op(proc, history.FTruncate, call, ret, t, history.Value{Stream: stream, From: before}, r)
}

func (h *hist) watermark(proc int, category string, marks map[string]int64, call, ret int64, t history.Type) {
	var r *history.Result
	if t == history.OK {
		r = &history.Result{Index: 32}
	}
	h.op(proc, history.FWatermark, call, ret, t, history.Value{Category: category, Watermarks: marks}, r)
}

func (h *hist) deleteStream(proc int, stream string, exp int64, call, ret int64, t history.Type) {
	var r *history.Result
	if t == history.OK {
		r = &history.Result{Version: exp, Index: 31}
	}
	h.op(proc, history.FDelete, call, ret, t, history.Value{Stream: stream, Expected: &exp}, r)
}

var (
	r0 = ev("r0", "ret-1", 0, 1)
	r1 = ev("r1", "ret-1", 1, 2)
	r2 = ev("r2", "ret-1", 2, 3)
	r3 = ev("r3", "ret-1", 3, 11)
	r4 = ev("r4", "ret-1", 4, 12)
)

// goodRetention is a valid history with removals: ret-1 gets positions
// 0..2, a truncate before 2 is acknowledged at 60, a read at 70 sees what
// is left; seven appends to other streams make the verdict meaningful.
func goodRetention() (*hist, []history.Event) {
	h := &hist{}
	h.append(1, "ret-1", "r0", nil, 10, 20, history.OK, 0, 1, 5)
	h.append(2, "ret-1", "r1", nil, 20, 30, history.OK, 1, 2, 6)
	h.append(1, "ret-1", "r2", nil, 30, 40, history.OK, 2, 3, 7)
	final := []history.Event{r2}
	for i := range 7 {
		id := string(rune('c'+i)) + "0"
		h.append(3, "other-"+id, id, nil, int64(100+20*i), int64(110+20*i), history.OK, 0, int64(4+i), uint64(8+i))
		final = append(final, ev(id, "other-"+id, 0, int64(4+i)))
	}
	h.truncate(4, "ret-1", 2, 50, 60, history.OK)
	h.readStream(2, "ret-1", history.Linearizable, 0, 70, 80, r2)
	return h, final
}

// TestCheckRetention: the rules for histories with removals find removed
// messages that survive or are read after the removal's acknowledgement,
// and acknowledged messages no removal covers that are lost, without
// flagging what a possibly applied removal explains.
func TestCheckRetention(t *testing.T) {
	without := func(f []history.Event, id string) []history.Event {
		var out []history.Event
		for _, e := range f {
			if e.ID != id {
				out = append(out, e)
			}
		}
		return out
	}
	withR1 := func(f []history.Event) []history.Event { return append([]history.Event{r1}, f...) }
	cases := []struct {
		name    string
		mutate  func(h *hist, final []history.Event) (n1, n2 []history.Event)
		want    any
		anomaly string
	}{
		{name: "good", want: true},
		{name: "removed message survives", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			return withR1(f), withR1(f)
		}, want: false, anomaly: "removed-present"},
		{name: "removed message survives on one node", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			return f, withR1(f)
		}, want: false, anomaly: "removed-present"},
		{name: "read after the removal sees a removed message", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.readStream(2, "ret-1", history.Linearizable, 0, 65, 68, r1, r2)
			return f, f
		}, want: false, anomaly: "removed-read"},
		{name: "read concurrent with the removal may see it", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.readStream(2, "ret-1", history.Linearizable, 0, 55, 65, r0, r1, r2)
			return f, f
		}, want: true},
		{name: "acknowledged message no removal covers is lost", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			return without(f, "r2"), without(f, "r2")
		}, want: false, anomaly: "lost"},
		{name: "an indeterminate truncate explains a missing message", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.truncate(5, "ret-1", 3, 200, 400, history.Info)
			return without(f, "r2"), without(f, "r2")
		}, want: true},
		{name: "a failed truncate does not", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.truncate(5, "ret-1", 3, 200, 400, history.Fail)
			return without(f, "r2"), without(f, "r2")
		}, want: false, anomaly: "lost"},
		{name: "a delete at version 2 removes position 2", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.deleteStream(5, "ret-1", 2, 200, 210, history.OK)
			return without(f, "r2"), without(f, "r2")
		}, want: true},
		{name: "a watermark at 2 removes position 2", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.watermark(5, "ret", map[string]int64{"ret-1": 2}, 200, 210, history.OK)
			return without(f, "r2"), without(f, "r2")
		}, want: true},
		{name: "what a watermark removed survives", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.watermark(5, "ret", map[string]int64{"ret-1": 2}, 200, 210, history.OK)
			return f, f
		}, want: false, anomaly: "removed-present"},
		{name: "a failed watermark removes nothing", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.watermark(5, "ret", map[string]int64{"ret-1": 2}, 200, 210, history.Fail)
			return without(f, "r2"), without(f, "r2")
		}, want: false, anomaly: "lost"},
		{name: "a hard delete, then appends fail", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.op(5, history.FDelete, 200, 210, history.OK, history.Value{Stream: "ret-1", Expected: ptr(2), Hard: true}, &history.Result{Version: 2})
			h.append(6, "ret-1", "r3", nil, 220, 230, history.Fail, 0, 0, 0)
			return without(f, "r2"), without(f, "r2")
		}, want: true},
		{name: "an append after a hard delete succeeds", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.op(5, history.FDelete, 200, 210, history.OK, history.Value{Stream: "ret-1", Expected: ptr(2), Hard: true}, &history.Result{Version: 2})
			h.append(6, "ret-1", "r3", nil, 220, 230, history.OK, 3, 11, 40)
			f = append(without(f, "r2"), r3)
			return f, f
		}, want: false, anomaly: "tombstone-write"},
		{name: "what a delete removed survives", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.deleteStream(5, "ret-1", 2, 200, 210, history.OK)
			return f, f
		}, want: false, anomaly: "removed-present"},
		{name: "hole in a final stream", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.append(6, "ret-1", "r3", nil, 300, 310, history.Info, 0, 0, 0)
			h.append(6, "ret-1", "r4", nil, 320, 330, history.OK, 4, 12, 40)
			f = append(f, r4)
			return f, f
		}, want: false, anomaly: "stream-hole"},
		{name: "hole in a read", mutate: func(h *hist, f []history.Event) ([]history.Event, []history.Event) {
			h.append(6, "ret-1", "r3", nil, 300, 310, history.OK, 3, 11, 40)
			h.append(6, "ret-1", "r4", nil, 320, 330, history.OK, 4, 12, 41)
			h.readStream(2, "ret-1", history.Linearizable, 0, 340, 350, r2, r4)
			f = append(f, r3, r4)
			return f, f
		}, want: false, anomaly: "read-hole"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, final := goodRetention()
			n1, n2 := final, final
			if tc.mutate != nil {
				n1, n2 = tc.mutate(h, final)
			}
			res := Check(Input{Ops: h.ops, Final: map[string][]history.Event{"n1": n1, "n2": n2}, Nodes: []string{"n1", "n2"}}, Options{})
			if res.Valid != tc.want {
				t.Fatalf("valid = %v, want %v; anomalies %v, examples %+v, unknown %v", res.Valid, tc.want, res.Anomalies, res.Examples, res.Unknown)
			}
			if tc.anomaly != "" && res.Anomalies[tc.anomaly] == 0 {
				t.Fatalf("anomalies %v, want %s", res.Anomalies, tc.anomaly)
			}
			if _, ok := res.Checkers["removals"]; !ok {
				t.Fatalf("checkers %v: the retention rules did not run", res.Checkers)
			}
		})
	}
}

// consumed adds to good()'s history a group's deliveries and acks of the
// acct messages a0, a1, b0 (global 1, 2, 3), each acked.
func consumed(h *hist) {
	deliver := func(proc int, e history.Event, at int64, attempt int32) {
		h.op(proc, history.FDeliver, at, at, history.OK, history.Value{Group: "g", Stream: e.Stream, IDs: []string{e.ID}},
			&history.Result{Pos: e.Pos, Global: e.Global, Attempt: attempt, Stream: e.Stream})
	}
	ack := func(proc int, id string, at int64, t history.Type) {
		h.op(proc, history.FAck, at, at+1, t, history.Value{Group: "g", IDs: []string{id}}, nil)
	}
	deliver(100, a0, 300, 1)
	ack(100, "a0", 301, history.OK)
	deliver(101, b0, 302, 1)
	ack(101, "b0", 303, history.Info) // maybe settled: enough
	deliver(100, a1, 305, 1)
	ack(100, "a1", 306, history.Fail)
	deliver(101, a1, 310, 2) // redelivered after a leader change
	ack(101, "a1", 311, history.OK)
}

func TestCheckConsumers(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(h *hist)
		want    any
		anomaly string
	}{
		{name: "good", mutate: func(*hist) {}, want: true},
		{name: "unacked", mutate: func(h *hist) {
			// Drop the last ack of a1: its only other ack failed.
			h.ops = h.ops[:len(h.ops)-2]
		}, want: false, anomaly: "group-unacked"},
		{name: "undelivered", mutate: func(h *hist) {
			// Drop a1's deliveries and acks: skipped by the group.
			h.ops = h.ops[:len(h.ops)-8]
		}, want: false, anomaly: "group-undelivered"},
		{name: "foreign", mutate: func(h *hist) {
			h.op(102, history.FDeliver, 400, 400, history.OK, history.Value{Group: "g", Stream: "acct-9", IDs: []string{"zz"}},
				&history.Result{Pos: 0, Global: 99, Attempt: 1, Stream: "acct-9"})
		}, want: false, anomaly: "group-foreign"},
		{name: "order", mutate: func(h *hist) {
			// a1 (position 1) first delivered before a0 (position 0).
			for i := range h.ops {
				if h.ops[i].F == history.FDeliver && h.ops[i].Value.IDs[0] == "a1" && h.ops[i].Time == 305 {
					h.ops[i].Time = 250
				}
			}
		}, want: false, anomaly: "group-order"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, final := good()
			consumed(h)
			tc.mutate(h)
			res := Check(Input{Ops: h.ops, Final: map[string][]history.Event{"n1": final, "n2": final}, Nodes: []string{"n1", "n2"}}, Options{})
			if res.Valid != tc.want {
				t.Fatalf("valid = %v, want %v; anomalies %v, examples %+v", res.Valid, tc.want, res.Anomalies, res.Examples)
			}
			if tc.anomaly != "" && res.Anomalies[tc.anomaly] == 0 {
				t.Fatalf("anomalies %v, want %s", res.Anomalies, tc.anomaly)
			}
			if tc.name == "good" && (res.Stats.Deliveries != 4 || res.Stats.Redeliveries != 1 || res.Checkers["consumers"] != "valid") {
				t.Fatalf("stats %+v, checkers %v", res.Stats, res.Checkers)
			}
		})
	}
}

// TestCheckMaxCount: the order category keeps 4 positions per stream;
// order-1 got positions 0..11 acknowledged. Expiry may take up to 7, never
// 8 or later while 11 is the last.
func TestCheckMaxCount(t *testing.T) {
	order := func(from, to int64) []history.Event {
		var out []history.Event
		for p := from; p <= to; p++ {
			out = append(out, ev(fmt.Sprintf("o%d", p), "order-1", p, p+1))
		}
		return out
	}
	base := func() *hist {
		h := &hist{}
		for p := int64(0); p <= 11; p++ {
			h.append(1, "order-1", fmt.Sprintf("o%d", p), nil, 10*p+1, 10*p+5, history.OK, p, p+1, uint64(p+1))
		}
		return h
	}
	cases := []struct {
		name    string
		read    []history.Event // a linearizable read of order-1 from 4, at the end
		final   []history.Event
		want    any
		anomaly string
	}{
		{name: "expired to the cap", final: order(8, 11), want: true},
		{name: "not expired yet", final: order(5, 11), want: true},
		{name: "a read of an older state", read: order(4, 7), final: order(8, 11), want: true},
		{name: "one too many in the final log", final: order(9, 11), want: false, anomaly: "capped-lost"},
		{name: "one too many in a read", read: order(9, 11), final: order(8, 11), want: false, anomaly: "capped-lost"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			if tc.read != nil {
				h.op(2, history.FReadStream, 500, 510, history.OK, history.Value{Stream: "order-1", Consistency: history.Linearizable, From: 4, Limit: 100}, &history.Result{Events: tc.read})
			}
			res := Check(Input{Ops: h.ops, Final: map[string][]history.Event{"n1": tc.final, "n2": tc.final}, Nodes: []string{"n1", "n2"},
				MaxCount: map[string]int64{"order": 4}}, Options{})
			if res.Valid != tc.want {
				t.Fatalf("valid = %v, want %v; anomalies %v, examples %+v, unknown %v", res.Valid, tc.want, res.Anomalies, res.Examples, res.Unknown)
			}
			if tc.anomaly != "" && res.Anomalies[tc.anomaly] == 0 {
				t.Fatalf("anomalies %v, want %s", res.Anomalies, tc.anomaly)
			}
			if res.Checkers["expiry"] == "" {
				t.Fatalf("checkers %v: the expiry rule did not run", res.Checkers)
			}
		})
	}
}

// TestCheckMaxAge: the temp category keeps messages 1.5 s; temp-1 got
// positions 0..3 appended at 0, 1, 2 and 3 s (and 10 more streams, so the
// history has enough appends). A read returning at 3.5 s may lack 0 and 1,
// never 2 (appended 1.5 s before, minus the slack, is not yet); every
// message may be gone from the final logs (read after an unknown wait).
func TestCheckMaxAge(t *testing.T) {
	sec := int64(time.Second)
	temp := func(ps ...int64) []history.Event {
		var out []history.Event
		for _, p := range ps {
			out = append(out, ev(fmt.Sprintf("t%d", p), "temp-1", p, p+1))
		}
		return out
	}
	base := func() *hist {
		h := &hist{}
		for p := int64(0); p <= 3; p++ {
			h.append(1, "temp-1", fmt.Sprintf("t%d", p), nil, p*sec, p*sec+10, history.OK, p, p+1, uint64(p+1))
		}
		for i := range 10 {
			h.append(2, fmt.Sprintf("acct-%d", i), fmt.Sprintf("a%d", i), nil, 5*sec+int64(i), 5*sec+int64(i)+5, history.OK, 0, int64(5+i), uint64(5+i))
		}
		return h
	}
	var others []history.Event
	for i := range 10 {
		others = append(others, ev(fmt.Sprintf("a%d", i), fmt.Sprintf("acct-%d", i), 0, int64(5+i)))
	}
	cases := []struct {
		name    string
		ret     int64
		read    []history.Event
		final   []history.Event
		want    any
		anomaly string
	}{
		{name: "old ones gone", ret: 3*sec + sec/2, read: temp(2, 3), final: others, want: true},
		{name: "nothing gone yet", ret: 3*sec + sec/2, read: temp(0, 1, 2, 3), final: append(temp(0, 1, 2, 3), others...), want: true},
		{name: "a young one gone", ret: 3*sec + 3*sec/10, read: temp(3), final: others, want: false, anomaly: "aged-early"},
		{name: "gone once old enough", ret: 3*sec + 9*sec/10, read: temp(3), final: others, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			h.op(3, history.FReadStream, tc.ret-sec/10, tc.ret, history.OK, history.Value{Stream: "temp-1", Consistency: history.Linearizable, Limit: 100}, &history.Result{Events: tc.read})
			res := Check(Input{Ops: h.ops, Final: map[string][]history.Event{"n1": tc.final, "n2": tc.final}, Nodes: []string{"n1", "n2"},
				MaxAge: map[string]time.Duration{"temp": 1500 * time.Millisecond}}, Options{})
			if res.Valid != tc.want {
				t.Fatalf("valid = %v, want %v; anomalies %v, examples %+v, unknown %v", res.Valid, tc.want, res.Anomalies, res.Examples, res.Unknown)
			}
			if tc.anomaly != "" && res.Anomalies[tc.anomaly] == 0 {
				t.Fatalf("anomalies %v, want %s", res.Anomalies, tc.anomaly)
			}
		})
	}
}
