// Package history owns the chaos harness's record of what happened: the
// operations clients invoked and how each completed, nemesis actions, and
// the JSON-lines file they are saved in. It must never interpret results;
// that is the checker's job.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
	"time"
)

// Type is an operation line's kind, Jepsen's vocabulary.
type Type string

const (
	Invoke Type = "invoke" // a client sent a request
	OK     Type = "ok"     // it certainly took effect (or the read returned)
	Fail   Type = "fail"   // it certainly did not take effect
	Info   Type = "info"   // it may or may not have taken effect
)

// Functions (Op.F).
const (
	FAppend       = "append"
	FReadStream   = "read-stream"
	FReadCategory = "read-category"
	FVersion      = "version"
	// Removals (the retention workload): a truncate's Value.From is its
	// bound (positions below it go); a delete carries Value.Expected (the
	// removals are asked with an expected version, so each names what it
	// removes: positions up to it).
	FTruncate = "truncate"
	FDelete   = "delete-stream"
	// FWatermark removes, per stream of Value.Watermarks, the positions up
	// to its watermark (the workload names positions the stream already
	// has, so each removes exactly those).
	FWatermark = "delete-by-watermark"
	// Persistent subscriptions (the consumers workload): a delivery is
	// recorded as an invocation and an ok completion when the consumer
	// receives it (Value.Group, Value.IDs the message id, Result Pos,
	// Global and Attempt); an ack is an ordinary call (Value.Group,
	// Value.IDs).
	FDeliver = "deliver"
	FAck     = "ack"
	// FQuery is a decider's read by tags (the dcb workload): Value.Tags
	// are the query (any of them), Value.From its position.
	FQuery = "query"
	// FIndexQuery is a read of a user-defined index (the indexes
	// workload): Value.Index says which and what range; Result.Events are
	// the messages of the hits in the order returned, Result.Values their
	// field values.
	FIndexQuery = "index-query"
)

// IsWrite reports whether f changes the log (so an error may leave its
// outcome unknown).
func IsWrite(f string) bool { return f == FAppend || f == FTruncate || f == FDelete || f == FWatermark }

// MayApply reports whether an error of f may leave its effect unknown: a
// write, or an ack (an unanswered ack may have settled the message).
func MayApply(f string) bool { return IsWrite(f) || f == FAck }

// NemesisProcess is the process of nemesis lines.
const NemesisProcess = -1

// Consistency levels as recorded.
const (
	Linearizable = "linearizable"
	Session      = "session"
	Local        = "local"
)

// Op is one line of history.jsonl: an invocation, a completion, or a
// nemesis action (Process NemesisProcess, F "start-<fault>" or
// "stop-<fault>").
type Op struct {
	Index     int     `json:"index"`
	Time      int64   `json:"time"` // nanoseconds since the run's monotonic base
	Process   int     `json:"process"`
	Type      Type    `json:"type"`
	F         string  `json:"f"`
	Node      string  `json:"node,omitempty"`
	Value     Value   `json:"value"`
	Result    *Result `json:"result,omitempty"`
	LatencyNS int64   `json:"latency_ns,omitempty"`
	Error     string  `json:"error,omitempty"`
}

// Value is what an operation asked for.
type Value struct {
	Stream      string   `json:"stream,omitempty"`
	Category    string   `json:"category,omitempty"`
	Expected    *int64   `json:"expected,omitempty"` // expected version; nil = any
	IDs         []string `json:"ids,omitempty"`      // message ids of an append
	Consistency string   `json:"consistency,omitempty"`
	MinIndex    uint64   `json:"min_index,omitempty"`
	From        int64    `json:"from,omitempty"` // stream position or global position
	Limit       int64    `json:"limit,omitempty"`
	Nemesis     string   `json:"nemesis,omitempty"` // what a nemesis line did
	// Watermarks of a delete-by-watermark: stream → last position removed.
	Watermarks map[string]int64 `json:"watermarks,omitempty"`
	// Hard: a delete-stream that leaves a tombstone (later appends fail).
	Hard  bool   `json:"hard,omitempty"`
	Group string `json:"group,omitempty"` // subscription group of a delivery or ack
	// Tags: an append's message tags, or a query's tags (any of them).
	Tags []string `json:"tags,omitempty"`
	// Condition: a conditional append's condition (the dcb workload).
	Condition *Condition `json:"condition,omitempty"`
	// Bodies: an append's messages as sent, one per id, when the
	// workload chooses them (the indexes workload); nil otherwise.
	Bodies []Body `json:"bodies,omitempty"`
	// Index: an index query's index and range (the indexes workload).
	Index *IndexQuery `json:"index,omitempty"`
}

// Body is one appended message's type, data (JSON) and tags.
type Body struct {
	Type string   `json:"type"`
	Data string   `json:"data"`
	Tags []string `json:"tags,omitempty"`
}

// IndexQuery is one index read as asked: equality on the first field
// (Equal), or an inclusive range From..To (either end optional), or a
// prefix of a string field; ascending.
type IndexQuery struct {
	Name   string  `json:"name"`
	Equal  *string `json:"equal,omitempty"`
	From   *string `json:"from,omitempty"`
	To     *string `json:"to,omitempty"`
	Prefix *string `json:"prefix,omitempty"`
}

// IndexDef is a user-defined index as the harness declares it (the indexes
// workload): a message is in it when it is of Category (if set), of one
// of Types (if any), carries one of Tags (if any), and has the one Field
// (a JSON pointer into its data) of FieldType ("int" or "string").
type IndexDef struct {
	Name      string   `json:"name"`
	Category  string   `json:"category,omitempty"`
	Types     []string `json:"types,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	Field     string   `json:"field"`
	FieldType string   `json:"field_type"`
}

// IndexRead is one node's whole index as a final read saw it: every hit in
// order (global position and field values), and the node's status.
type IndexRead struct {
	Hits    []IndexHit `json:"hits"`
	Entries int64      `json:"entries"`
	Covered uint64     `json:"covered_index"`
	Applied uint64     `json:"applied_index"`
}

// IndexHit is one entry of an index read.
type IndexHit struct {
	Global int64    `json:"global"`
	Values []string `json:"values"`
}

// Condition is an append condition as the dcb workload sends it: fail if
// a message carrying any of AnyTags has a global position above After.
type Condition struct {
	AnyTags []string `json:"any_tags"`
	After   int64    `json:"after"`
}

// Result is what an ok (or a version-conflict fail) completion returned.
type Result struct {
	Pos     int64  `json:"pos"`    // append: first stream position
	Global  int64  `json:"global"` // append: first global position
	Index   uint64 `json:"index"`  // append: Raft index; read: applied index
	Version int64  `json:"version"`
	Actual  *int64 `json:"actual,omitempty"` // version conflict: the stream's version
	// Duplicate: the append's ids were already written (idempotent
	// writes); the positions are the original ones.
	Duplicate bool    `json:"duplicate,omitempty"`
	Events    []Event `json:"events,omitempty"`
	// Deleted: a removal's count of messages it removed.
	Deleted int64 `json:"deleted,omitempty"`
	// Attempt: a delivery's number (1 the first time the owner hands it
	// out).
	Attempt int32  `json:"attempt,omitempty"`
	Stream  string `json:"stream,omitempty"` // a delivery's stream
	// Match: a failed condition's first matching global position.
	Match int64 `json:"match,omitempty"`
	// Values: an index query's hits' field values, one per event of
	// Events; More: the query had more pages (it is not complete).
	Values [][]string `json:"values,omitempty"`
	More   bool       `json:"more,omitempty"`
	// Entries: an index query's status (this node's entry count).
	Entries int64 `json:"entries,omitempty"`
}

// Event is one message as a read (or the final log) saw it.
type Event struct {
	ID     string `json:"id"`
	Stream string `json:"stream"`
	Pos    int64  `json:"pos"`
	Global int64  `json:"global"`
	// Tags, joined by ",": the harness's tags have no comma, and a
	// string keeps Event comparable.
	Tags string `json:"tags,omitempty"`
}

// Pair is a client operation: its invocation and its completion. An
// operation still open when the history ends is completed as Info at
// math.MaxInt64.
type Pair struct {
	Invoke   Op
	Complete Op
}

// Call and Return are the pair's time interval.
func (p Pair) Call() int64   { return p.Invoke.Time }
func (p Pair) Return() int64 { return p.Complete.Time }

// Type is the completion's type.
func (p Pair) Type() Type { return p.Complete.Type }

// Recorder appends ops to a history in memory and, when given a writer,
// to a JSON-lines file as they happen (so a crashed harness leaves the
// history behind). It is safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	base time.Time
	ops  []Op
	enc  *json.Encoder
	w    *bufio.Writer
	err  error
}

// NewRecorder starts a history whose times count from now.
func NewRecorder(w io.Writer) *Recorder {
	r := &Recorder{base: time.Now()}
	if w != nil {
		r.w = bufio.NewWriter(w)
		r.enc = json.NewEncoder(r.w)
	}
	return r
}

// Now is the time since the history began, on the monotonic clock.
func (r *Recorder) Now() int64 { return int64(time.Since(r.base)) }

// Add stamps op with the next index (and the time, when zero) and records it.
func (r *Recorder) Add(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	if op.Time == 0 {
		op.Time = r.Now()
	}
	op.Index = len(r.ops)
	r.ops = append(r.ops, op)
	if r.enc != nil && r.err == nil {
		r.err = r.enc.Encode(op)
	}
	return op
}

// Ops returns a copy of every op recorded so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Flush writes buffered lines out and reports the first write error.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil && r.err == nil {
		r.err = r.w.Flush()
	}
	return r.err
}

// Load reads a history.jsonl file.
func Load(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var op Op
		if err := dec.Decode(&op); err == io.EOF {
			return ops, nil
		} else if err != nil {
			return ops, fmt.Errorf("history %s: op %d: %w", path, len(ops), err)
		}
		ops = append(ops, op)
	}
}

// Pairs matches every client invocation with its completion (each process
// has at most one operation open) and returns them in invocation order.
// It fails when a process has two open operations or a completion has no
// invocation: the history would not be analysable.
func Pairs(ops []Op) ([]Pair, error) {
	open := map[int]Op{}
	var pairs []Pair
	for _, op := range ops {
		if op.Process == NemesisProcess {
			continue
		}
		if op.Type == Invoke {
			if prev, ok := open[op.Process]; ok {
				return nil, fmt.Errorf("process %d invoked op %d while op %d was open", op.Process, op.Index, prev.Index)
			}
			open[op.Process] = op
			continue
		}
		inv, ok := open[op.Process]
		if !ok {
			return nil, fmt.Errorf("op %d completes nothing: process %d has no open invocation", op.Index, op.Process)
		}
		delete(open, op.Process)
		pairs = append(pairs, Pair{Invoke: inv, Complete: op})
	}
	for _, inv := range open {
		pairs = append(pairs, Pair{Invoke: inv, Complete: Op{Index: -1, Time: math.MaxInt64, Process: inv.Process, Type: Info, F: inv.F, Node: inv.Node, Value: inv.Value, Error: "never completed"}})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].Invoke.Index < pairs[j].Invoke.Index })
	return pairs, nil
}

// Window is a nemesis fault's time span, for reports.
type Window struct {
	Fault string `json:"fault"`
	Start int64  `json:"start"`
	End   int64  `json:"end"` // math.MaxInt64 when never stopped
	What  string `json:"what"`
}

// Windows pairs "start-X" with the next "stop-X" nemesis lines.
func Windows(ops []Op) []Window {
	open := map[string]int{}
	var ws []Window
	for _, op := range ops {
		if op.Process != NemesisProcess || op.Type != Info {
			continue
		}
		switch {
		case len(op.F) > 6 && op.F[:6] == "start-":
			open[op.F[6:]] = len(ws)
			ws = append(ws, Window{Fault: op.F[6:], Start: op.Time, End: math.MaxInt64, What: op.Value.Nemesis})
		case len(op.F) > 5 && op.F[:5] == "stop-":
			if i, ok := open[op.F[5:]]; ok {
				ws[i].End = op.Time
				delete(open, op.F[5:])
			}
		}
	}
	return ws
}
