package history

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestRecordLoadPair(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(f)
	exp := int64(-1)
	r.Add(Op{Process: 1, Type: Invoke, F: FAppend, Value: Value{Stream: "a-1", IDs: []string{"x"}, Expected: &exp}})
	r.Add(Op{Process: NemesisProcess, Type: Info, F: "start-kill", Value: Value{Nemesis: "killed n1"}})
	r.Add(Op{Process: 2, Type: Invoke, F: FReadStream, Value: Value{Stream: "a-1"}})
	r.Add(Op{Process: 1, Type: OK, F: FAppend, Result: &Result{Pos: 0, Global: 1, Index: 7}})
	r.Add(Op{Process: NemesisProcess, Type: Info, F: "stop-kill"})
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ops, err := Load(path)
	if err != nil || len(ops) != 5 {
		t.Fatalf("load: %d ops, %v", len(ops), err)
	}
	for i, op := range ops {
		if op.Index != i || (i > 0 && op.Time < ops[i-1].Time) {
			t.Fatalf("op %d: index %d time %d after %d", i, op.Index, op.Time, ops[max(i-1, 0)].Time)
		}
	}
	if *ops[0].Value.Expected != -1 || ops[3].Result.Index != 7 {
		t.Fatalf("round trip lost values: %+v %+v", ops[0].Value, ops[3].Result)
	}
	pairs, err := Pairs(ops)
	if err != nil || len(pairs) != 2 {
		t.Fatalf("pairs: %d, %v", len(pairs), err)
	}
	if pairs[0].Type() != OK || pairs[0].Invoke.Value.Stream != "a-1" {
		t.Fatalf("first pair %+v", pairs[0])
	}
	if pairs[1].Type() != Info || pairs[1].Return() != math.MaxInt64 {
		t.Fatalf("an open read must complete as info at infinity: %+v", pairs[1].Complete)
	}
	ws := Windows(ops)
	if len(ws) != 1 || ws[0].Fault != "kill" || ws[0].What != "killed n1" || ws[0].End != ops[4].Time {
		t.Fatalf("windows %+v", ws)
	}
	// Two open operations in one process cannot be analysed.
	bad := []Op{{Index: 0, Process: 1, Type: Invoke, F: FAppend}, {Index: 1, Process: 1, Type: Invoke, F: FAppend}}
	if _, err := Pairs(bad); err == nil {
		t.Fatal("overlapping operations of one process: no error")
	}
}
