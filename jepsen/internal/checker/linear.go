package checker

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/skalddb/skald/jepsen/internal/history"
)

// LinearResult is porcupine's verdict over every stream.
type LinearResult struct {
	Result     string   `json:"result"` // ok, illegal, unknown, skipped
	Ops        int      `json:"ops"`
	Streams    int      `json:"streams"`
	Patched    int      `json:"patched"` // indeterminate appends placed from the final log
	DurationMS int64    `json:"duration_ms"`
	Failing    []string `json:"failing,omitempty"`
}

const (
	linAppend = iota
	linVersion
	linRead
)

const (
	anyVersion = -2
	noInfo     = -3
)

// linIn and linOut are the model's input and output. The state is the
// stream's version (-1 when empty): stream contents are checked against
// the final log elsewhere, so lengths and versions are all that matter.
type linIn struct {
	f        int
	stream   string
	exp      int64 // anyVersion or the expected version
	k        int64 // messages appended
	from     int64
	max      int64 // 0: no limit
	conflict bool  // append completed with a version conflict
}

type linOut struct {
	pos    int64 // append: last position written; version: the version
	n      int64 // read: events returned
	actual int64 // conflict: the stream's version, or noInfo
}

var streamModel = porcupine.Model{
	Init: func() any { return int64(-1) },
	Step: func(state, input, output any) (bool, any) {
		v, in, out := state.(int64), input.(linIn), output.(linOut)
		switch in.f {
		case linAppend:
			pre := in.exp == anyVersion || in.exp == v
			if in.conflict {
				return !pre && (out.actual == noInfo || out.actual == v), v
			}
			return pre && out.pos == v+in.k, v + in.k
		case linVersion:
			return out.pos == v, v
		case linRead:
			want := max(0, v-in.from+1)
			if in.max > 0 {
				want = min(want, in.max)
			}
			return out.n == want, v
		}
		return false, v
	},
	Equal: func(a, b any) bool { return a.(int64) == b.(int64) },
	Hash:  func(s any) uint64 { return uint64(s.(int64) + 1) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(linIn), output.(linOut)
		switch in.f {
		case linAppend:
			exp := "any"
			if in.exp != anyVersion {
				exp = fmt.Sprint(in.exp)
			}
			if in.conflict {
				return fmt.Sprintf("append(%d, expect %s) -> conflict (actual %d)", in.k, exp, out.actual)
			}
			return fmt.Sprintf("append(%d, expect %s) -> last %d", in.k, exp, out.pos)
		case linVersion:
			return fmt.Sprintf("version() -> %d", out.pos)
		}
		return fmt.Sprintf("read(from %d, max %d) -> %d events", in.from, in.max, out.n)
	},
	DescribeState: func(s any) string { return fmt.Sprintf("version %d", s.(int64)) },
}

// linearOps turns the history into porcupine operations per stream:
// linearizable reads and version reads, acknowledged appends, version
// conflicts, and indeterminate appends patched from the final log (absent:
// dropped, since they never took effect; present: acknowledged with their
// final position, returning no later than the earliest read that saw them
// or the next append of the stream).
func (s *state) linearOps() (map[string][]porcupine.Operation, int) {
	byStream := map[string][]porcupine.Operation{}
	type placed struct {
		pos  int64
		op   porcupine.Operation
		info bool
	}
	appends := map[string][]placed{}
	patched := 0
	for _, p := range s.pairs {
		v := p.Invoke.Value
		client := p.Invoke.Process
		switch p.Invoke.F {
		case history.FAppend:
			exp := int64(anyVersion)
			if v.Expected != nil {
				exp = *v.Expected
			}
			in := linIn{f: linAppend, stream: v.Stream, exp: exp, k: int64(len(v.IDs))}
			switch p.Type() {
			case history.OK:
				last := p.Complete.Result.Pos + in.k - 1
				appends[v.Stream] = append(appends[v.Stream], placed{last, porcupine.Operation{ClientId: client, Input: in, Call: p.Call(), Output: linOut{pos: last}, Return: p.Return(), Metadata: p.Complete.Index}, false})
			case history.Fail:
				if p.Complete.Result == nil || p.Complete.Result.Actual == nil {
					continue // refused before proposing: no effect to linearize
				}
				in.conflict = true
				byStream[v.Stream] = append(byStream[v.Stream], porcupine.Operation{ClientId: client, Input: in, Call: p.Call(), Output: linOut{actual: *p.Complete.Result.Actual}, Return: p.Return(), Metadata: p.Complete.Index})
			case history.Info:
				e, ok := s.finalBy[v.IDs[len(v.IDs)-1]]
				if !ok {
					continue
				}
				ret := int64(math.MaxInt64)
				for _, id := range v.IDs {
					if t, ok := s.observed[id]; ok {
						ret = min(ret, t)
					}
				}
				patched++
				appends[v.Stream] = append(appends[v.Stream], placed{e.Pos, porcupine.Operation{ClientId: client, Input: in, Call: p.Call(), Output: linOut{pos: e.Pos}, Return: ret, Metadata: p.Invoke.Index}, true})
			}
		case history.FVersion, history.FReadStream:
			if p.Type() != history.OK || v.Consistency != history.Linearizable {
				continue
			}
			op := porcupine.Operation{ClientId: client, Call: p.Call(), Return: p.Return(), Metadata: p.Complete.Index}
			if p.Invoke.F == history.FVersion {
				op.Input, op.Output = linIn{f: linVersion, stream: v.Stream}, linOut{pos: p.Complete.Result.Version}
			} else {
				op.Input, op.Output = linIn{f: linRead, stream: v.Stream, from: v.From, max: v.Limit}, linOut{n: int64(len(p.Complete.Result.Events))}
			}
			byStream[v.Stream] = append(byStream[v.Stream], op)
		}
	}
	for stream, as := range appends {
		sort.Slice(as, func(i, j int) bool { return as[i].pos < as[j].pos })
		bound := int64(math.MaxInt64)
		for i := len(as) - 1; i >= 0; i-- {
			if as[i].info && bound != math.MaxInt64 {
				as[i].op.Return = max(min(as[i].op.Return, bound-1), as[i].op.Call)
			}
			bound = min(bound, as[i].op.Return)
		}
		for _, a := range as {
			byStream[stream] = append(byStream[stream], a.op)
		}
	}
	return byStream, patched
}

// checkLinear runs porcupine on every stream (each stream is a partition:
// P-compositionality) and writes a visualization of every stream that is
// not linearizable.
func checkLinear(s *state) bool {
	start := time.Now()
	byStream, patched := s.linearOps()
	lr := &s.res.Linear
	lr.Patched = patched
	lr.Streams = len(byStream)
	names := make([]string, 0, len(byStream))
	for name, ops := range byStream {
		names = append(names, name)
		lr.Ops += len(ops)
	}
	sort.Strings(names)
	if lr.Ops == 0 {
		lr.Result = "skipped"
		return false
	}
	lr.Result = "ok"
	deadline := start.Add(s.opts.LinearTimeout)
	for _, name := range names {
		left := time.Until(deadline)
		if left <= 0 {
			lr.Result = "unknown"
			break
		}
		res, info := porcupine.CheckOperationsVerbose(streamModel, byStream[name], left)
		switch res {
		case porcupine.Illegal:
			lr.Result = "illegal"
			lr.Failing = append(lr.Failing, name)
			s.add("linearizability", nil, "stream %s: no linearization of %d operations (see linear/%s.html)", name, len(byStream[name]), fileName(name))
			if s.opts.VisualizeDir != "" {
				if err := os.MkdirAll(s.opts.VisualizeDir, 0o755); err == nil {
					_ = porcupine.VisualizePath(streamModel, info, filepath.Join(s.opts.VisualizeDir, fileName(name)+".html"))
				}
			}
		case porcupine.Unknown:
			if lr.Result == "ok" {
				lr.Result = "unknown"
			}
		}
	}
	lr.DurationMS = time.Since(start).Milliseconds()
	if lr.Result == "unknown" {
		s.res.Unknown = append(s.res.Unknown, fmt.Sprintf("porcupine timed out after %s", s.opts.LinearTimeout))
		return false
	}
	return true
}

func fileName(stream string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' {
			return '_'
		}
		return r
	}, stream)
}
