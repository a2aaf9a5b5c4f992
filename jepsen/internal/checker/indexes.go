package checker

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/skalddb/skald/jepsen/internal/history"
)

// Rules for user-defined indexes (the indexes workload). The checker has
// its own model of an event index, written from the definition and not
// from the server's code: a message is in index D when it is of D's
// category (the stream name up to the first '-'), of one of D's types, and
// carries one of D's tags (each only when D names any), and its data has
// D's field (a JSON pointer) as a JSON value of D's type (an int: a
// number literal that parses as an int64; a string); the entry is (field
// value, global position), ordered by value (ints numerically, strings
// bytewise), then position. A message's type, data and tags come from the
// append that sent it (history.Value.Bodies; an append without bodies
// sent type "Jepsen", data {"p":N} and no tags).
//
//   - index-missing, index-extra, index-value, index-count: every node's
//     whole index, read at LOCAL once its index loop covered the node's
//     final log, holds exactly the model's entries of that node's own
//     final log, in order, with the model's values (index-missing: an
//     entry the model has and the index lacks; index-extra: the reverse;
//     index-value: a value differs or an entry is out of order), and the
//     node's entry count equals the model's (index-count: the query skips
//     the entries of removed messages the loop failed to drop, the count
//     does not).
//   - index-stale-read: a LINEARIZABLE query that returned its whole
//     answer (no further page) lacks a message an append acknowledged
//     before the query was invoked put in the index and in the query's
//     range, that no truncate or delete that may have been applied and
//     was invoked before the query returned covers.
//   - index-removed-read: a LINEARIZABLE query returned a message below
//     the bound of a removal of its stream acknowledged before the query
//     was invoked.
//   - index-wrong-hit: any query (every consistency) returned a message
//     the model does not put in the index, a value other than the model's,
//     a value outside the query's range, or a message at another place
//     than the final log holds it; index-read-order: hits not in index
//     order.
//
// What the history cannot decide is not checked: a query with a further
// page (its answer is partial) is exempt from index-stale-read; an
// append whose outcome is unknown is never required; SESSION and LOCAL
// queries are checked for what they return, not for what they lack.

// indexEntry is one entry of the model.
type indexEntry struct {
	value  string // as the server writes it (FormatIndexValue)
	num    int64  // int fields
	global int64
}

// indexModel computes the entries of a definition.
type indexModel struct {
	def    history.IndexDef
	bodies map[string]history.Body // id → body
}

// defaultBody is what the client's plain appends send (client.Append).
var defaultBody = history.Body{Type: "Jepsen", Data: `{}`}

func (m *indexModel) body(id string) history.Body {
	if b, ok := m.bodies[id]; ok {
		return b
	}
	return defaultBody
}

// entry returns e's entry, ok false when e is not in the index.
func (m *indexModel) entry(e history.Event) (indexEntry, bool) {
	d := m.def
	b := m.body(e.ID)
	if d.Category != "" && category(e.Stream) != d.Category {
		return indexEntry{}, false
	}
	if len(d.Types) > 0 && !slices.Contains(d.Types, b.Type) {
		return indexEntry{}, false
	}
	if len(d.Tags) > 0 && !slices.ContainsFunc(d.Tags, func(t string) bool { return slices.Contains(b.Tags, t) }) {
		return indexEntry{}, false
	}
	dec := json.NewDecoder(strings.NewReader(b.Data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return indexEntry{}, false
	}
	v, ok := pointer(doc, d.Field)
	if !ok {
		return indexEntry{}, false
	}
	switch d.FieldType {
	case "int":
		n, ok := v.(json.Number)
		if !ok {
			return indexEntry{}, false
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return indexEntry{}, false
		}
		return indexEntry{value: strconv.FormatInt(i, 10), num: i, global: e.Global}, true
	case "string":
		s, ok := v.(string)
		if !ok {
			return indexEntry{}, false
		}
		return indexEntry{value: s, global: e.Global}, true
	}
	return indexEntry{}, false
}

// pointer resolves an RFC 6901 JSON pointer in doc.
func pointer(doc any, p string) (any, bool) {
	if p == "" {
		return doc, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := doc.(type) {
		case map[string]any:
			v, ok := x[tok]
			if !ok {
				return nil, false
			}
			doc = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			doc = x[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

// less orders entries as the index does.
func (m *indexModel) less(a, b indexEntry) bool {
	if a.value != b.value {
		if m.def.FieldType == "int" {
			return a.num < b.num
		}
		return a.value < b.value
	}
	return a.global < b.global
}

// build is the model index of log.
func (m *indexModel) build(log []history.Event) []indexEntry {
	var out []indexEntry
	for _, e := range log {
		if en, ok := m.entry(e); ok {
			out = append(out, en)
		}
	}
	sort.Slice(out, func(i, j int) bool { return m.less(out[i], out[j]) })
	return out
}

// inRange reports whether en satisfies query q.
func (m *indexModel) inRange(q *history.IndexQuery, en indexEntry) bool {
	cmp := func(bound string) (int, bool) { // en vs bound
		if m.def.FieldType == "int" {
			n, err := strconv.ParseInt(bound, 10, 64)
			if err != nil {
				return 0, false
			}
			switch {
			case en.num < n:
				return -1, true
			case en.num > n:
				return 1, true
			}
			return 0, true
		}
		return strings.Compare(en.value, bound), true
	}
	if q.Equal != nil {
		c, ok := cmp(*q.Equal)
		return ok && c == 0
	}
	if q.Prefix != nil && !strings.HasPrefix(en.value, *q.Prefix) {
		return false
	}
	if q.From != nil {
		if c, ok := cmp(*q.From); !ok || c < 0 {
			return false
		}
	}
	if q.To != nil {
		if c, ok := cmp(*q.To); !ok || c > 0 {
			return false
		}
	}
	return true
}

// checkIndexes runs the index rules; it does not run (false) without
// index definitions.
func checkIndexes(s *state, defs []history.IndexDef, reads map[string]map[string]history.IndexRead) bool {
	if len(defs) == 0 {
		return false
	}
	bodies := map[string]history.Body{}
	for _, p := range s.pairs {
		if p.Invoke.F != history.FAppend {
			continue
		}
		for i, id := range p.Invoke.Value.IDs {
			if i < len(p.Invoke.Value.Bodies) {
				bodies[id] = p.Invoke.Value.Bodies[i]
			}
		}
	}
	models := map[string]*indexModel{}
	for _, d := range defs {
		models[d.Name] = &indexModel{def: d, bodies: bodies}
	}
	ran := checkFinalIndexes(s, defs, models, reads)
	checkIndexReads(s, models)
	for _, r := range reads[s.refNode] {
		s.res.Stats.FinalIndexEntries += len(r.Hits)
	}
	for _, p := range s.pairs {
		if p.Invoke.F == history.FIndexQuery && p.Type() == history.OK && p.Complete.Result != nil {
			s.res.Stats.IndexHits += len(p.Complete.Result.Events)
		}
	}
	return ran
}

// checkFinalIndexes compares every node's final index reads with the
// model of its final log: index-missing, index-extra, index-value,
// index-count. A node without reads makes the rule unknown.
func checkFinalIndexes(s *state, defs []history.IndexDef, models map[string]*indexModel, reads map[string]map[string]history.IndexRead) bool {
	nodes := make([]string, 0, len(s.final))
	for n := range s.final {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	ran := true
	for _, n := range nodes {
		for _, d := range defs {
			r, ok := reads[n][d.Name]
			if !ok {
				s.res.Unknown = append(s.res.Unknown, fmt.Sprintf("no final read of index %s on %s", d.Name, n))
				ran = false
				continue
			}
			compareIndex(s, n, models[d.Name], models[d.Name].build(s.final[n]), r)
		}
	}
	return ran
}

// compareIndex reports the differences between a node's index read and
// the model's entries want.
func compareIndex(s *state, node string, m *indexModel, want []indexEntry, r history.IndexRead) {
	name := m.def.Name
	wantAt := map[int64]indexEntry{}
	for _, en := range want {
		wantAt[en.global] = en
	}
	got := map[int64]bool{}
	var prev *indexEntry
	for _, h := range r.Hits {
		got[h.Global] = true
		en, ok := wantAt[h.Global]
		switch {
		case !ok:
			s.add("index-extra", nil, "index %s on %s holds global %d (values %v), which the model of its final log does not index", name, node, h.Global, h.Values)
			continue
		case len(h.Values) != 1 || h.Values[0] != en.value:
			s.add("index-value", nil, "index %s on %s holds global %d with values %v, the model %q", name, node, h.Global, h.Values, en.value)
		case prev != nil && !m.less(*prev, en):
			s.add("index-value", nil, "index %s on %s holds global %d (value %q) after global %d (value %q)", name, node, en.global, en.value, prev.global, prev.value)
		}
		prev = &en
	}
	for _, en := range want {
		if !got[en.global] {
			s.add("index-missing", nil, "index %s on %s lacks global %d (value %q) of its final log", name, node, en.global, en.value)
		}
	}
	if r.Entries != int64(len(want)) {
		s.add("index-count", nil, "index %s on %s counts %d entries, the model of its final log %d (its read returned %d)", name, node, r.Entries, len(want), len(r.Hits))
	}
}

// checkIndexReads: index-stale-read, index-removed-read, index-wrong-hit
// and index-read-order over the queries of the history.
func checkIndexReads(s *state, models map[string]*indexModel) {
	type ackedIdx struct {
		e   history.Event
		ret int64
		op  int
	}
	var acked []ackedIdx // acknowledged messages, by acknowledgement time
	for _, p := range s.pairs {
		if p.Invoke.F != history.FAppend || p.Type() != history.OK || p.Complete.Result == nil {
			continue
		}
		r := p.Complete.Result
		for k, id := range p.Invoke.Value.IDs {
			acked = append(acked, ackedIdx{history.Event{ID: id, Stream: p.Invoke.Value.Stream, Pos: r.Pos + int64(k), Global: r.Global + int64(k)}, p.Return(), p.Complete.Index})
		}
	}
	sort.Slice(acked, func(i, j int) bool { return acked[i].ret < acked[j].ret })
	bounds := s.ackedBounds()
	// removedBy reports whether a removal that may have been applied and
	// was invoked before t covers e.
	removedBy := func(e history.Event, t int64) bool {
		for _, r := range s.removals[e.Stream] {
			if e.Pos < r.bound && r.pair.Call() < t {
				return true
			}
		}
		return false
	}
	for _, p := range s.pairs {
		if p.Invoke.F != history.FIndexQuery || p.Type() != history.OK || p.Complete.Result == nil || p.Invoke.Value.Index == nil {
			continue
		}
		q, r := p.Invoke.Value.Index, p.Complete.Result
		m, ok := models[q.Name]
		if !ok {
			continue
		}
		ops := []int{p.Complete.Index}
		have := map[string]bool{}
		var prev *indexEntry
		for i, e := range r.Events {
			have[e.ID] = true
			en, ok := m.entry(e)
			var vals []string
			if i < len(r.Values) {
				vals = r.Values[i]
			}
			f, inFinal := s.finalBy[e.ID]
			switch {
			case !ok:
				s.add("index-wrong-hit", ops, "%s query of %s on %s returned %s (%s/%d), which the index does not hold", p.Invoke.Value.Consistency, q.Name, p.Invoke.Node, e.ID, e.Stream, e.Pos)
				continue
			case len(vals) != 1 || vals[0] != en.value:
				s.add("index-wrong-hit", ops, "%s query of %s on %s returned %s with values %v, its data has %q", p.Invoke.Value.Consistency, q.Name, p.Invoke.Node, e.ID, vals, en.value)
			case !m.inRange(q, en):
				s.add("index-wrong-hit", ops, "%s query of %s on %s (%s) returned %s of value %q", p.Invoke.Value.Consistency, q.Name, p.Invoke.Node, describeIndexQuery(q), e.ID, en.value)
			case inFinal && (f.Stream != e.Stream || f.Pos != e.Pos || f.Global != e.Global):
				s.add("index-wrong-hit", ops, "%s query of %s on %s returned %+v, the final log has %+v", p.Invoke.Value.Consistency, q.Name, p.Invoke.Node, e, f)
			}
			if prev != nil && !m.less(*prev, en) {
				s.add("index-read-order", ops, "%s query of %s on %s returned global %d (value %q) after global %d (value %q)", p.Invoke.Value.Consistency, q.Name, p.Invoke.Node, en.global, en.value, prev.global, prev.value)
			}
			prev = &en
		}
		if p.Invoke.Value.Consistency != history.Linearizable {
			continue
		}
		for _, e := range r.Events {
			if b := bounds[e.Stream].before(p.Call()); e.Pos < b {
				s.add("index-removed-read", ops, "linearizable query of %s on %s returned %s/%d (id %s), below the bound %d of a removal acknowledged before it began",
					q.Name, p.Invoke.Node, e.Stream, e.Pos, e.ID, b)
			}
		}
		if r.More {
			continue // a partial answer: what it lacks may be on the next page
		}
		for _, a := range acked {
			if a.ret >= p.Call() {
				break
			}
			en, ok := m.entry(a.e)
			if !ok || have[a.e.ID] || !m.inRange(q, en) || removedBy(a.e, p.Return()) {
				continue
			}
			s.add("index-stale-read", []int{p.Complete.Index, a.op}, "linearizable query of %s on %s (%s) lacks %s (%s/%d, global %d, value %q), acknowledged before it began",
				q.Name, p.Invoke.Node, describeIndexQuery(q), a.e.ID, a.e.Stream, a.e.Pos, a.e.Global, en.value)
		}
	}
}

func describeIndexQuery(q *history.IndexQuery) string {
	str := func(p *string) string {
		if p == nil {
			return "*"
		}
		return *p
	}
	switch {
	case q.Equal != nil:
		return "= " + *q.Equal
	case q.Prefix != nil:
		return "prefix " + *q.Prefix
	}
	return "[" + str(q.From) + ", " + str(q.To) + "]"
}
