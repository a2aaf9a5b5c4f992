package checker

import (
	"testing"

	"github.com/skalddb/skald/jepsen/internal/history"
)

var amountDef = history.IndexDef{Name: "amount", Category: "acct", Types: []string{"Deposit"}, Field: "/amount", FieldType: "int"}

func (h *hist) appendBody(proc int, stream, id string, b history.Body, call, ret int64, t history.Type, pos, global int64) {
	var r *history.Result
	if t == history.OK {
		r = &history.Result{Pos: pos, Global: global, Index: uint64(global + 4)}
	}
	h.op(proc, history.FAppend, call, ret, t, history.Value{Stream: stream, IDs: []string{id}, Bodies: []history.Body{b}}, r)
}

// indexRead is an amount query's result: the events and their values.
func (h *hist) indexRead(proc int, consistency string, q history.IndexQuery, more bool, call, ret int64, hits ...history.Event) {
	r := &history.Result{Events: hits, More: more}
	for _, e := range hits {
		r.Values = append(r.Values, []string{amountOf[e.ID]})
	}
	h.op(proc, history.FIndexQuery, call, ret, history.OK, history.Value{Index: &q, Consistency: consistency, Limit: 1000}, r)
}

var (
	x0 = ev("x0", "acct-1", 0, 1)  // Deposit 5: indexed
	x1 = ev("x1", "acct-1", 1, 2)  // Note 5: not of the types
	x2 = ev("x2", "acct-2", 0, 3)  // Deposit "5": a string, skipped
	x3 = ev("x3", "acct-2", 1, 4)  // Deposit 7: indexed
	x4 = ev("x4", "order-1", 0, 5) // Deposit 5: not of the category
	// amountOf is what a query reports as each message's value.
	amountOf = map[string]string{"x0": "5", "x1": "5", "x2": "5", "x3": "7", "x4": "5"}
)

func str(s string) *string { return &s }

// goodIndexes is a valid history of the indexes workload: five appends
// with bodies, five plain ones, and a linearizable query of amount 5 that
// sees the one message it must; the final index on every node holds x0
// and x3.
func goodIndexes() (*hist, []history.Event, history.IndexRead) {
	h := &hist{}
	h.appendBody(1, "acct-1", "x0", history.Body{Type: "Deposit", Data: `{"amount":5}`}, 10, 20, history.OK, 0, 1)
	h.appendBody(1, "acct-1", "x1", history.Body{Type: "Note", Data: `{"amount":5}`}, 20, 30, history.OK, 1, 2)
	h.appendBody(2, "acct-2", "x2", history.Body{Type: "Deposit", Data: `{"amount":"5"}`}, 10, 20, history.OK, 0, 3)
	h.appendBody(2, "acct-2", "x3", history.Body{Type: "Deposit", Data: `{"amount":7,"p":1}`}, 20, 30, history.OK, 1, 4)
	h.appendBody(3, "order-1", "x4", history.Body{Type: "Deposit", Data: `{"amount":5}`}, 10, 20, history.OK, 0, 5)
	final := []history.Event{x0, x1, x2, x3, x4}
	for i := range 5 {
		id := string(rune('c'+i)) + "0"
		h.append(4, "other-"+id, id, nil, int64(40+10*i), int64(45+10*i), history.OK, 0, int64(6+i), uint64(10+i))
		final = append(final, ev(id, "other-"+id, 0, int64(6+i)))
	}
	h.indexRead(5, history.Linearizable, history.IndexQuery{Name: "amount", Equal: str("5")}, false, 100, 110, x0)
	read := history.IndexRead{Hits: []history.IndexHit{{Global: 1, Values: []string{"5"}}, {Global: 4, Values: []string{"7"}}}, Entries: 2}
	return h, final, read
}

// TestCheckIndexes: the index rules find a node's index that differs from
// the model of its final log (an entry missing, extra, of another value,
// out of order, or counted but hidden), a linearizable query that misses
// an acknowledged message or returns one removed before it began, and a
// query of any consistency that returns what the index does not hold;
// and they excuse what the history leaves open.
func TestCheckIndexes(t *testing.T) {
	amount5 := history.IndexQuery{Name: "amount", Equal: str("5")}
	cases := []struct {
		name    string
		mutate  func(h *hist, final []history.Event, n1, n2 *history.IndexRead) (f1, f2 []history.Event)
		want    any
		anomaly string
	}{
		{name: "good", want: true},
		{name: "an entry missing on one node", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			n2.Hits, n2.Entries = n2.Hits[1:], 1
			return f, f
		}, want: false, anomaly: "index-missing"},
		{name: "an entry of a message of another type", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			n1.Hits, n1.Entries = append([]history.IndexHit{{Global: 2, Values: []string{"5"}}}, n1.Hits...), 3
			return f, f
		}, want: false, anomaly: "index-extra"},
		{name: "an entry of a message whose field is a string", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			n1.Hits, n1.Entries = append(n1.Hits, history.IndexHit{Global: 3, Values: []string{"5"}}), 3
			return f, f
		}, want: false, anomaly: "index-extra"},
		{name: "an entry of another value", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			n1.Hits[1].Values = []string{"8"}
			return f, f
		}, want: false, anomaly: "index-value"},
		{name: "entries out of order", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			n1.Hits[0], n1.Hits[1] = n1.Hits[1], n1.Hits[0]
			return f, f
		}, want: false, anomaly: "index-value"},
		{name: "a removed message still counted", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			n1.Entries = 3
			return f, f
		}, want: false, anomaly: "index-count"},
		{name: "an index of the node's own log, not of another's", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			// n2's final log lacks x3 (a divergence, reported as such);
			// its index must not hold x3 either.
			return f, append(append([]history.Event(nil), f[:3]...), f[4:]...)
		}, want: false, anomaly: "index-extra"},
		{name: "a linearizable query misses an acknowledged message", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			h.indexRead(6, history.Linearizable, amount5, false, 120, 130)
			return f, f
		}, want: false, anomaly: "index-stale-read"},
		{name: "a range query misses one", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			h.indexRead(6, history.Linearizable, history.IndexQuery{Name: "amount", From: str("6")}, false, 120, 130)
			return f, f
		}, want: false, anomaly: "index-stale-read"},
		{name: "a query concurrent with the append may miss it", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			h.indexRead(6, history.Linearizable, amount5, false, 15, 25)
			return f, f
		}, want: true},
		{name: "a local query may miss it", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			h.indexRead(6, history.Local, amount5, false, 120, 130)
			return f, f
		}, want: true},
		{name: "a partial answer may miss it", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			h.indexRead(6, history.Linearizable, amount5, true, 120, 130)
			return f, f
		}, want: true},
		{name: "a truncate that may have applied explains a miss", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			h.truncate(7, "acct-1", 1, 115, 500, history.Info)
			h.indexRead(6, history.Linearizable, amount5, false, 120, 130)
			f = f[1:]
			n1.Hits, n1.Entries = n1.Hits[1:], 1
			*n2 = *n1
			return f, f
		}, want: true},
		{name: "a truncate invoked after the query returned does not", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			h.indexRead(6, history.Linearizable, amount5, false, 120, 130)
			h.truncate(7, "acct-1", 1, 140, 500, history.Info)
			f = f[1:]
			n1.Hits, n1.Entries = n1.Hits[1:], 1
			*n2 = *n1
			return f, f
		}, want: false, anomaly: "index-stale-read"},
		{name: "a linearizable query returns a message removed before it began", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			h.truncate(7, "acct-1", 1, 115, 118, history.OK)
			h.indexRead(6, history.Linearizable, amount5, false, 120, 130, x0)
			f = f[1:]
			n1.Hits, n1.Entries = n1.Hits[1:], 1
			*n2 = *n1
			return f, f
		}, want: false, anomaly: "index-removed-read"},
		{name: "a session query returns a message the index does not hold", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			h.indexRead(6, history.Session, amount5, false, 120, 130, x0, x1)
			return f, f
		}, want: false, anomaly: "index-wrong-hit"},
		{name: "a query returns a message out of its range", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			h.indexRead(6, history.Local, amount5, false, 120, 130, x0, x3)
			return f, f
		}, want: false, anomaly: "index-wrong-hit"},
		{name: "a query returns hits out of order", mutate: func(h *hist, f []history.Event, n1, n2 *history.IndexRead) ([]history.Event, []history.Event) {
			h.indexRead(6, history.Linearizable, history.IndexQuery{Name: "amount", From: str("5"), To: str("7")}, false, 120, 130, x3, x0)
			return f, f
		}, want: false, anomaly: "index-read-order"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, final, read := goodIndexes()
			n1, n2 := read, read
			n1.Hits, n2.Hits = append([]history.IndexHit(nil), read.Hits...), append([]history.IndexHit(nil), read.Hits...)
			f1, f2 := final, final
			if tc.mutate != nil {
				f1, f2 = tc.mutate(h, final, &n1, &n2)
			}
			res := Check(Input{Ops: h.ops, Final: map[string][]history.Event{"n1": f1, "n2": f2}, Nodes: []string{"n1", "n2"},
				IndexDefs:    []history.IndexDef{amountDef},
				FinalIndexes: map[string]map[string]history.IndexRead{"n1": {"amount": n1}, "n2": {"amount": n2}}}, Options{})
			if res.Valid != tc.want {
				t.Fatalf("valid = %v, want %v; anomalies %v, examples %+v, unknown %v", res.Valid, tc.want, res.Anomalies, res.Examples, res.Unknown)
			}
			if tc.anomaly != "" && res.Anomalies[tc.anomaly] == 0 {
				t.Fatalf("anomalies %v, want %s", res.Anomalies, tc.anomaly)
			}
			if res.Checkers["indexes"] == "" {
				t.Fatalf("checkers %v: the index rules did not run", res.Checkers)
			}
		})
	}
	t.Run("a node without a final index read", func(t *testing.T) {
		h, final, read := goodIndexes()
		res := Check(Input{Ops: h.ops, Final: map[string][]history.Event{"n1": final, "n2": final}, Nodes: []string{"n1", "n2"},
			IndexDefs: []history.IndexDef{amountDef}, FinalIndexes: map[string]map[string]history.IndexRead{"n1": {"amount": read}}}, Options{})
		if res.Valid != "unknown" || res.Checkers["indexes"] != "unknown" {
			t.Fatalf("valid = %v, indexes checker %q, want unknown; unknown %v", res.Valid, res.Checkers["indexes"], res.Unknown)
		}
	})
}

// TestIndexModelEntry: the model's reading of a definition, case by case.
func TestIndexModelEntry(t *testing.T) {
	tagged := history.IndexDef{Name: "owner", Tags: []string{"vip"}, Field: "/a/b~1c", FieldType: "string"}
	cases := []struct {
		def   history.IndexDef
		e     history.Event
		body  *history.Body
		value string // "" = not in the index
	}{
		{amountDef, x0, &history.Body{Type: "Deposit", Data: `{"amount":5}`}, "5"},
		{amountDef, x0, &history.Body{Type: "Deposit", Data: `{"amount":-12}`}, "-12"},
		{amountDef, x0, &history.Body{Type: "Deposit", Data: `{"amount":1.5}`}, ""},
		{amountDef, x0, &history.Body{Type: "Deposit", Data: `{"amount":"5"}`}, ""},
		{amountDef, x0, &history.Body{Type: "Deposit", Data: `{}`}, ""},
		{amountDef, x0, &history.Body{Type: "Withdraw", Data: `{"amount":5}`}, ""},
		{amountDef, x4, &history.Body{Type: "Deposit", Data: `{"amount":5}`}, ""},
		{amountDef, x0, nil, ""}, // a plain append: type Jepsen
		{tagged, x4, &history.Body{Type: "Note", Data: `{"a":{"b/c":"o1"}}`, Tags: []string{"t1", "vip"}}, "o1"},
		{tagged, x4, &history.Body{Type: "Note", Data: `{"a":{"b/c":"o1"}}`, Tags: []string{"t1"}}, ""},
		{tagged, x4, &history.Body{Type: "Note", Data: `{"a":{"b/c":7}}`, Tags: []string{"vip"}}, ""},
	}
	for i, tc := range cases {
		m := &indexModel{def: tc.def, bodies: map[string]history.Body{}}
		if tc.body != nil {
			m.bodies[tc.e.ID] = *tc.body
		}
		en, ok := m.entry(tc.e)
		if got := map[bool]string{true: en.value, false: ""}[ok]; got != tc.value {
			t.Errorf("case %d (%s, %+v): value %q (in index %v), want %q", i, tc.def.Name, tc.body, en.value, ok, tc.value)
		}
	}
}
