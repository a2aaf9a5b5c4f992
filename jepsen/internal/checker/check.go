// Package checker owns the rules a chaos run's history must satisfy
// (jepsen/README.md, anomaly glossary)
// and the verdict: valid, invalid (an anomaly was found) or unknown (the
// run cannot support a verdict). It reads a history and the final logs;
// it must never talk to a cluster.
package checker

import (
	"fmt"
	"sort"
	"time"

	"github.com/skalddb/skald/jepsen/internal/history"
)

// Input is what a run leaves for checking.
type Input struct {
	Ops []history.Op
	// Final is every node's namespace log after healing, in global order
	// (a ReadAll from position 1). A node missing here could not be read.
	Final map[string][]history.Event
	// Nodes is every node of the run; a node without a final log makes the
	// result unknown.
	Nodes []string
	// MaxCount maps a category to the max-count retention policy its
	// streams had for the whole run (set before traffic): the server's
	// expiry may remove a stream's positions up to its version - count.
	MaxCount map[string]int64
	// MaxAge maps a category to the max-age retention policy its streams
	// had for the whole run: expiry may remove a message once older.
	MaxAge map[string]time.Duration
	// IndexDefs are the user-defined indexes of the run (the indexes
	// workload), FinalIndexes every node's final read of each (node →
	// index name → read); indexes.go.
	IndexDefs    []history.IndexDef
	FinalIndexes map[string]map[string]history.IndexRead
}

// Options tunes checking.
type Options struct {
	// LinearTimeout bounds porcupine per stream; past it the result is
	// unknown. Default 60 s.
	LinearTimeout time.Duration
	// MinOKAppends is the fewest acknowledged appends that make a verdict
	// meaningful. Default 10.
	MinOKAppends int
	// VisualizeDir, when set, receives porcupine HTML for every stream
	// that is not linearizable.
	VisualizeDir string
	// MaxExamples is how many examples are kept per anomaly. Default 10.
	MaxExamples int
}

// Anomaly is one violation found.
type Anomaly struct {
	Kind string `json:"kind"`
	Msg  string `json:"msg"`
	Ops  []int  `json:"ops,omitempty"` // history indexes involved
}

// Result is a run's verdict and what it rests on.
type Result struct {
	// Valid is true, false or "unknown".
	Valid     any               `json:"valid"`
	Anomalies map[string]int    `json:"anomalies"`
	Examples  []Anomaly         `json:"examples,omitempty"`
	Unknown   []string          `json:"unknown,omitempty"`
	Checkers  map[string]string `json:"checkers"`
	Linear    LinearResult      `json:"linear"`
	Stats     Stats             `json:"stats"`
}

// Invalid reports whether the verdict is false.
func (r Result) Invalid() bool { return r.Valid == false }

// Stats counts what the history holds.
type Stats struct {
	Ops           int                             `json:"ops"`
	ByF           map[string]map[history.Type]int `json:"by_f"`
	FinalEvents   int                             `json:"final_events"`
	Streams       int                             `json:"streams"`
	Recovered     int                             `json:"recovered"`      // indeterminate appends found in the final log
	Retried       int                             `json:"retried"`        // appends sent more than once (idempotent workload)
	DuplicateAcks int                             `json:"duplicate_acks"` // acknowledgements of ids already written
	LostUnacked   int                             `json:"indeterminate_absent"`
	// The consumers workload: deliveries, redeliveries (deliveries of an
	// id after its first) and successful acks.
	Deliveries   int `json:"deliveries,omitempty"`
	Redeliveries int `json:"redeliveries,omitempty"`
	AcksOK       int `json:"acks_ok,omitempty"`
	// The indexes workload: hits of ok index queries, and the entries of
	// every index in the reference node's final read.
	IndexHits         int     `json:"index_hits,omitempty"`
	FinalIndexEntries int     `json:"final_index_entries,omitempty"`
	DurationSec       float64 `json:"duration_sec"`
	OKPerSec          float64 `json:"ok_ops_per_sec"`
	FaultOKPerSec     float64 `json:"ok_ops_per_sec_during_faults"`
}

// state is what every rule reads: the history indexed.
type state struct {
	opts     Options
	pairs    []history.Pair
	ref      []history.Event // the reference final log
	refNode  string
	finalBy  map[string]history.Event // id → event in ref
	count    map[string]int           // id → occurrences in ref
	streams  map[string][]history.Event
	appends  map[string]*history.Pair // id → the append that carried it
	observed map[string]int64         // id → earliest return of a read that saw it
	res      *Result
	perKind  map[string]int
	// final is every node's final log (the retention rules read them all).
	final map[string][]history.Event
	// removals holds, per stream, the truncates and deletes that may have
	// been applied (ok or info), when the history has any: then the
	// retention rules run instead of the rules that assume an append-only
	// log (see retention.go).
	removals map[string][]removal
	// seen is, per id, the message as the earliest read saw it.
	seen map[string]history.Event
	// maxCount and maxAge are Input's; top is, per stream, the highest
	// position any acknowledgement, read or final log showed (expiry
	// removes at most up to top - max-count); acked maps a stream position
	// to what an acknowledged append put there.
	maxCount map[string]int64
	maxAge   map[string]time.Duration
	top      map[string]int64
	acked    map[history.Event]ackedMsg
}

// ackedMsg is a message an acknowledged append wrote: its id, and when
// the append was invoked (the leader stamped its time after that).
type ackedMsg struct {
	id   string
	call int64
}

func (s *state) add(kind string, ops []int, format string, args ...any) {
	s.res.Anomalies[kind]++
	if s.perKind[kind] < s.opts.MaxExamples {
		s.perKind[kind]++
		s.res.Examples = append(s.res.Examples, Anomaly{Kind: kind, Msg: fmt.Sprintf(format, args...), Ops: ops})
	}
}

// rule is one group of checks; it returns false when it could not run.
type rule struct {
	name string
	run  func(*state) bool
}

var rules = []rule{
	{"durability", checkDurability},
	{"convergence", nil}, // run separately: needs every node
	{"streams", checkStreams},
	{"global", checkGlobal},
	{"category", checkCategory},
	{"realtime-reads", checkRealtimeReads},
	{"read-your-writes", checkRYW},
	{"cas", checkCAS},
	{"dcb", checkDCB},
	{"linearizable", checkLinear},
}

// retentionRules replace rules for a history with removals: positions
// below a removal's bound may vanish, so gaps, reads that later miss
// messages and version-only models no longer describe a correct server.
var retentionRules = []rule{
	{"durability", checkDurability}, // a removable message is not lost
	{"convergence", nil},
	{"removals", checkRemovals},
	{"retention-streams", checkRetentionStreams},
	{"expiry", checkExpiry},
	{"realtime-order", checkRealtimeOrder},
}

// Check runs every rule over in.
func Check(in Input, opts Options) Result {
	if opts.LinearTimeout == 0 {
		opts.LinearTimeout = 60 * time.Second
	}
	if opts.MinOKAppends == 0 {
		opts.MinOKAppends = 10
	}
	if opts.MaxExamples == 0 {
		opts.MaxExamples = 10
	}
	res := Result{Anomalies: map[string]int{}, Checkers: map[string]string{}}
	pairs, err := history.Pairs(in.Ops)
	if err != nil {
		res.Valid = "unknown"
		res.Unknown = append(res.Unknown, "history: "+err.Error())
		return res
	}
	s := &state{opts: opts, pairs: pairs, res: &res, perKind: map[string]int{}, final: in.Final, maxCount: in.MaxCount, maxAge: in.MaxAge}
	s.stats(in)
	mergeRetries(s) // after stats: those count every attempt

	nodes := append([]string(nil), in.Nodes...)
	sort.Strings(nodes)
	for _, n := range nodes {
		if _, ok := in.Final[n]; !ok {
			res.Unknown = append(res.Unknown, fmt.Sprintf("no-recovery: node %s could not be read after healing", n))
		}
	}
	for _, n := range nodes {
		if f, ok := in.Final[n]; ok {
			s.ref, s.refNode = f, n
			break
		}
	}
	if s.refNode == "" {
		res.Valid = "unknown"
		res.Unknown = append(res.Unknown, "no final log from any node")
		return res
	}
	s.index()
	before := len(res.Examples)
	checkConvergence(s, in.Final, nodes)
	res.Checkers["convergence"] = verdict(len(res.Examples) > before, true)

	set := rules
	if s.indexRemovals() {
		set = retentionRules
	}
	if s.hasDeliveries() {
		set = append(set[:len(set):len(set)], rule{"consumers", checkConsumers})
	}
	if len(in.IndexDefs) > 0 {
		set = append(set[:len(set):len(set)], rule{"indexes", func(s *state) bool { return checkIndexes(s, in.IndexDefs, in.FinalIndexes) }})
	}
	for _, r := range set {
		if r.run == nil {
			continue
		}
		n := total(res.Anomalies)
		ran := r.run(s)
		res.Checkers[r.name] = verdict(total(res.Anomalies) > n, ran)
	}
	if oks := res.Stats.ByF[history.FAppend][history.OK]; oks < opts.MinOKAppends {
		res.Unknown = append(res.Unknown, fmt.Sprintf("too few acknowledged appends: %d < %d", oks, opts.MinOKAppends))
	}
	switch {
	case total(res.Anomalies) > 0:
		res.Valid = false
	case len(res.Unknown) > 0:
		res.Valid = "unknown"
	default:
		res.Valid = true
	}
	return res
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func verdict(found, ran bool) string {
	switch {
	case found:
		return "invalid"
	case !ran:
		return "unknown"
	}
	return "valid"
}

// index builds the lookups every rule shares.
func (s *state) index() {
	s.finalBy = map[string]history.Event{}
	s.count = map[string]int{}
	s.streams = map[string][]history.Event{}
	for _, e := range s.ref {
		if _, ok := s.finalBy[e.ID]; !ok {
			s.finalBy[e.ID] = e
		}
		s.count[e.ID]++
		s.streams[e.Stream] = append(s.streams[e.Stream], e)
	}
	s.appends = map[string]*history.Pair{}
	s.observed = map[string]int64{}
	s.seen = map[string]history.Event{}
	for i := range s.pairs {
		p := &s.pairs[i]
		switch p.Invoke.F {
		case history.FAppend:
			for _, id := range p.Invoke.Value.IDs {
				s.appends[id] = p
			}
		case history.FReadStream, history.FReadCategory:
			if p.Type() != history.OK || p.Complete.Result == nil {
				continue
			}
			for _, e := range p.Complete.Result.Events {
				if t, ok := s.observed[e.ID]; !ok || p.Return() < t {
					s.observed[e.ID] = p.Return()
					s.seen[e.ID] = e
				}
			}
		}
	}
	s.res.Stats.FinalEvents = len(s.ref)
	s.res.Stats.Streams = len(s.streams)
}

func (s *state) stats(in Input) {
	st := &s.res.Stats
	st.ByF = map[string]map[history.Type]int{}
	var last int64
	for _, p := range s.pairs {
		st.Ops++
		if st.ByF[p.Invoke.F] == nil {
			st.ByF[p.Invoke.F] = map[history.Type]int{}
		}
		st.ByF[p.Invoke.F][p.Type()]++
		if p.Type() == history.OK && p.Complete.Result != nil && p.Complete.Result.Duplicate {
			st.DuplicateAcks++
		}
		if p.Complete.Time != 1<<63-1 && p.Complete.Time > last {
			last = p.Complete.Time
		}
	}
	if last == 0 {
		return
	}
	st.DurationSec = float64(last) / 1e9
	windows := history.Windows(in.Ops)
	var ok, faultOK int
	var faultNS int64
	for _, w := range windows {
		faultNS += min(w.End, last) - w.Start
	}
	for _, p := range s.pairs {
		if p.Type() != history.OK {
			continue
		}
		ok++
		for _, w := range windows {
			if p.Return() >= w.Start && p.Return() < w.End {
				faultOK++
				break
			}
		}
	}
	st.OKPerSec = float64(ok) / st.DurationSec
	if faultNS > 0 {
		st.FaultOKPerSec = float64(faultOK) / (float64(faultNS) / 1e9)
	}
}

// category is the category of a stream: the part before the first '-'.
func category(stream string) string {
	for i := 0; i < len(stream); i++ {
		if stream[i] == '-' {
			return stream[:i]
		}
	}
	return stream
}
