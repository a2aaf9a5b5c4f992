// Package workload owns what the chaos harness's clients do: which
// operations, on which streams and nodes, at what rate. Every logical
// process has at most one operation open, and a process whose operation
// ended indeterminate is retired (its worker continues under a new id), so
// per-process order stays meaningful. It never retries a write, except in
// the idempotent workload: there an append whose outcome is unknown is sent
// again, as a new operation of a new process, with the same ids and data
// (the server must apply it once), and some appends are sent twice at once
// through two nodes (a hedged request), so retries race their originals.
// The retention workload adds truncates, soft deletes (with an expected
// version) and watermark deletions (up to positions the streams are known
// to have), so each names the positions it removes, and hard deletes of
// streams of their own (after which appends must fail), racing the appends of
// the "acct" streams, while a max-count policy (RetentionMaxCount on the
// category RetentionCategory, set by the runner) caps the "order" streams
// through the leader's expiry entries.
// The dcb workload's deciders read by tags (a course and a student), then
// append a message with both tags on condition that nothing carrying
// either appeared after what they read (Dynamic Consistency Boundary).
package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/skalddb/skald/jepsen/internal/client"
	"github.com/skalddb/skald/jepsen/internal/history"
)

// The retention workload's policies: every stream of RetentionCategory
// keeps only its last RetentionMaxCount positions, and the messages of
// AgeCategory go once older than RetentionMaxAge. Explicit removals leave
// those categories alone, so what their streams lose is the expiry's doing.
const (
	RetentionCategory       = "order"
	RetentionMaxCount int64 = 8
	AgeCategory             = "temp"
	RetentionMaxAge         = 1500 * time.Millisecond
)

// Names lists the workloads.
var Names = []string{"append", "cas", "ryw", "mixed", "idempotent", "retention", "consumers", "dcb", "indexes"}

// Config is one workload run.
type Config struct {
	Name        string
	Concurrency int
	Rate        float64 // operations per second over all workers
	Streams     int     // per category; categories are "acct" and "order"
	Nodes       []string
	Seed        uint64
}

// Run drives the workload until ctx ends.
func Run(ctx context.Context, c *client.Client, cfg Config) error {
	var mix []weighted
	switch cfg.Name {
	case "append", "consumers": // consumers: the group's consumers run beside (consumers.go)
		mix = []weighted{{70, opAppend}, {20, opReadStream}, {10, opReadCategory}}
	case "cas":
		mix = []weighted{{20, opVersion}, {70, opCASAppend}, {10, opReadStream}}
	case "ryw":
		mix = []weighted{{40, opAppend}, {45, opSessionStream}, {15, opSessionCategory}}
	case "idempotent":
		mix = []weighted{{70, opIdemAppend}, {20, opReadStream}, {10, opReadCategory}}
	case "retention":
		mix = []weighted{{53, opAppend}, {9, opTruncate}, {3, opWatermark}, {3, opDelete}, {2, opTombstone}, {20, opReadStream}, {10, opReadCategory}}
	case "dcb":
		mix = []weighted{{85, opDecide}, {10, opReadStream}, {5, opReadCategory}}
	case "indexes":
		mix = []weighted{{56, opIndexAppend}, {4, opTruncate}, {1, opDelete}, {20, opIndexQuery}, {5, opIndexSession}, {5, opIndexLocal},
			{6, opReadStream}, {3, opReadCategory}}
	case "mixed":
		mix = []weighted{{25, opAppend}, {15, opCASAppend}, {10, opVersion}, {15, opReadStream}, {10, opReadCategory},
			{10, opSessionStream}, {5, opSessionCategory}, {10, opLocalStream}}
	default:
		return fmt.Errorf("unknown workload %q (known: %v)", cfg.Name, Names)
	}
	if cfg.Streams <= 0 {
		cfg.Streams = 8
		switch cfg.Name {
		case "cas":
			cfg.Streams = 1 // contention: several clients expect the same version
		case "retention":
			cfg.Streams = 3 // removals race the appends of the same streams
		}
	}
	tokens := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Duration(float64(time.Second) / max(cfg.Rate, 1)))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				close(tokens)
				return
			case <-t.C:
				select {
				case tokens <- struct{}{}:
				default: // every worker busy: the rate is not reached
				}
			}
		}
	}()
	k := &known{version: map[string]int64{}}
	var wg sync.WaitGroup
	for i := range cfg.Concurrency {
		w := &worker{
			c: c, cfg: cfg, known: k, pid: i, mix: mix,
			rng:     rand.New(rand.NewPCG(cfg.Seed, uint64(i))),
			version: map[string]int64{},
			decided: map[string]int64{},
		}
		// Two workers in three stay on one node (follower forwarding and
		// follower reads); the rest pick a node per operation (failover).
		if i%3 != 2 {
			w.pinned = cfg.Nodes[i%len(cfg.Nodes)]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range tokens {
				w.step(ctx)
			}
		}()
	}
	wg.Wait()
	return nil
}

type opKind int

const (
	opAppend opKind = iota
	opCASAppend
	opVersion
	opReadStream
	opReadCategory
	opSessionStream
	opSessionCategory
	opLocalStream
	opIdemAppend
	opTruncate
	opDelete
	opWatermark
	opTombstone
	opDecide
	opIndexAppend
	opIndexQuery
	opIndexSession
	opIndexLocal
)

// The dcb workload's tags: few, so decisions overlap (each one reads and
// conditions on one course and one student, and conflicts with every
// decision sharing either).
const (
	dcbCourses  = 3
	dcbStudents = 4
	dcbPage     = 1000 // a decider reads at most this many messages per query
)

// Idempotent appends: how many times one append is sent at most, and how
// often it is also hedged through a second node at the same time.
const (
	idemAttempts = 30
	hedgeOneIn   = 4
)

type weighted struct {
	w  int
	op opKind
}

// known is what any worker has seen, to aim reads near the end of the log
// (where staleness would show).
type known struct {
	mu      sync.Mutex
	version map[string]int64
	global  int64
}

func (k *known) see(op history.Op) {
	if op.Type != history.OK || op.Result == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	r := op.Result
	if op.F == history.FAppend {
		last := r.Pos + int64(len(op.Value.IDs)) - 1
		k.version[op.Value.Stream] = max(k.version[op.Value.Stream], last)
		k.global = max(k.global, r.Global+int64(len(op.Value.IDs))-1)
	}
	for _, e := range r.Events {
		k.version[e.Stream] = max(k.version[e.Stream], e.Pos)
		k.global = max(k.global, e.Global)
	}
}

func (k *known) streamFrom(stream string) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return max(0, k.version[stream]-10)
}

// last is the highest position of stream any worker saw acknowledged or
// read (-1: none). The stream's version is at least that, so a truncate
// bound up to last + 1 is one the server accepts.
func (k *known) last(stream string) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if v, ok := k.version[stream]; ok {
		return v
	}
	return -1
}

func (k *known) globalFrom() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return max(1, k.global-100)
}

type worker struct {
	c      *client.Client
	cfg    Config
	known  *known
	rng    *rand.Rand
	mix    []weighted
	pid    int
	pinned string
	// session is the highest Raft index this process has seen (writes and
	// reads): session reads ask for it.
	session uint64
	// version is the last version this process saw per stream, for
	// expected-version appends.
	version  map[string]int64
	lastWrit string
	// hedges counts this worker's hedged requests (each gets a process id
	// of its own, above every worker's).
	hedges int
	// decided is, per decision (course|student), the global position up
	// to which this worker has read its messages.
	decided map[string]int64
}

func (w *worker) node() string {
	if w.pinned != "" {
		return w.pinned
	}
	return w.cfg.Nodes[w.rng.IntN(len(w.cfg.Nodes))]
}

// otherNode is a node other than the one just written through, so a
// session read crosses nodes.
func (w *worker) otherNode(not string) string {
	for {
		n := w.cfg.Nodes[w.rng.IntN(len(w.cfg.Nodes))]
		if n != not || len(w.cfg.Nodes) == 1 {
			return n
		}
	}
}

func (w *worker) stream() string {
	if w.cfg.Name == "dcb" {
		return fmt.Sprintf("course-c%d", w.rng.IntN(dcbCourses))
	}
	cats := []string{"acct", "order"}
	if w.cfg.Name == "retention" {
		cats = append(cats, AgeCategory)
	}
	return fmt.Sprintf("%s-%d", cats[w.rng.IntN(len(cats))], w.rng.IntN(w.cfg.Streams))
}

// readFrom is where a stream read starts: near the end, but from the
// start for the streams an age limit keeps short (so a read shows which
// of their messages survive).
func (w *worker) readFrom(stream string) int64 {
	if strings.HasPrefix(stream, AgeCategory+"-") {
		return 0
	}
	return w.known.streamFrom(stream)
}

// removable picks a stream for a truncate or delete: one outside
// RetentionCategory (the indexes workload: any, both categories are
// indexed).
func (w *worker) removable() string {
	if w.cfg.Name == "indexes" {
		return w.stream()
	}
	return fmt.Sprintf("acct-%d", w.rng.IntN(w.cfg.Streams))
}

func (w *worker) pick() opKind {
	total := 0
	for _, m := range w.mix {
		total += m.w
	}
	r := w.rng.IntN(total)
	for _, m := range w.mix {
		if r < m.w {
			return m.op
		}
		r -= m.w
	}
	return w.mix[0].op
}

func (w *worker) step(ctx context.Context) {
	var op history.Op
	switch w.pick() {
	case opAppend:
		st, n := w.stream(), 1+w.rng.IntN(2)
		ids := make([]string, n)
		for i := range ids {
			ids[i] = w.c.NewID(w.pid)
		}
		node := w.node()
		op = w.c.Append(ctx, w.pid, node, st, ids, nil)
		w.lastWrit = node
	case opIdemAppend:
		w.idemAppend(ctx)
		return
	case opDecide:
		w.decide(ctx)
		return
	case opIndexAppend:
		st, n := w.stream(), 1+w.rng.IntN(2)
		ids, bodies := make([]string, n), make([]history.Body, n)
		for i := range ids {
			ids[i], bodies[i] = w.c.NewID(w.pid), w.body()
		}
		node := w.node()
		op = w.c.AppendBodies(ctx, w.pid, node, st, ids, bodies)
		w.lastWrit = node
	case opIndexQuery:
		op = w.c.IndexQuery(ctx, w.pid, w.node(), w.indexQuery(), indexPage, client.ReadOptions{Consistency: history.Linearizable})
	case opIndexSession:
		op = w.c.IndexQuery(ctx, w.pid, w.otherNode(w.lastWrit), w.indexQuery(), indexPage, client.ReadOptions{Consistency: history.Session, MinIndex: w.session})
	case opIndexLocal:
		op = w.c.IndexQuery(ctx, w.pid, w.node(), w.indexQuery(), indexPage, client.ReadOptions{Consistency: history.Local})
	case opCASAppend:
		st := w.stream()
		exp := int64(-1)
		if v, ok := w.version[st]; ok {
			exp = v
		}
		node := w.node()
		op = w.c.Append(ctx, w.pid, node, st, []string{w.c.NewID(w.pid)}, &exp)
		w.lastWrit = node
	case opTruncate:
		// A bound near the end of the stream (up to 11 below the last
		// known position + 1), so removals race the appends there and a
		// tail of acknowledged messages survives for durability to check.
		st := w.removable()
		node := w.node()
		back := int64(w.rng.IntN(12))
		if w.cfg.Name == "indexes" {
			back = int64(w.rng.IntN(40)) // keep more for the final index comparison
		}
		op = w.c.Truncate(ctx, w.pid, node, st, max(0, w.known.last(st)+1-back))
		w.lastWrit = node
	case opDelete:
		// At the last known version: a delete that names what it removes
		// (often refused: the stream moved on).
		st := w.removable()
		node := w.node()
		op = w.c.DeleteStream(ctx, w.pid, node, st, w.known.last(st), false)
		w.lastWrit = node
	case opWatermark:
		// One to all of the acct streams, each up to a position it is
		// known to have (up to 5 below the last known), so each names
		// exactly what it removes.
		marks := map[string]int64{}
		for i := range w.cfg.Streams {
			st := fmt.Sprintf("acct-%d", i)
			if last := w.known.last(st); last >= 0 && w.rng.IntN(2) == 0 {
				marks[st] = max(0, last-int64(w.rng.IntN(6)))
			}
		}
		if len(marks) == 0 {
			return
		}
		node := w.node()
		op = w.c.DeleteByWatermark(ctx, w.pid, node, "acct", marks)
		w.lastWrit = node
	case opTombstone:
		// The tomb streams are written only here: an append, or a hard
		// delete at the last known version, after which every append to
		// the stream must fail.
		st := fmt.Sprintf("tomb-%d", w.rng.IntN(20))
		node := w.node()
		if last := w.known.last(st); last < 0 || w.rng.IntN(2) == 0 {
			op = w.c.Append(ctx, w.pid, node, st, []string{w.c.NewID(w.pid)}, nil)
		} else {
			op = w.c.DeleteStream(ctx, w.pid, node, st, last, true)
		}
		w.lastWrit = node
	case opVersion:
		op = w.c.Version(ctx, w.pid, w.node(), w.stream(), client.ReadOptions{Consistency: history.Linearizable})
	case opReadStream:
		st := w.stream()
		op = w.c.ReadStream(ctx, w.pid, w.node(), st, w.readFrom(st), 100, client.ReadOptions{Consistency: history.Linearizable})
	case opReadCategory:
		op = w.c.ReadCategory(ctx, w.pid, w.node(), w.category(), w.known.globalFrom(), 200, client.ReadOptions{Consistency: history.Linearizable})
	case opSessionStream:
		st := w.stream()
		op = w.c.ReadStream(ctx, w.pid, w.otherNode(w.lastWrit), st, w.known.streamFrom(st), 100, client.ReadOptions{Consistency: history.Session, MinIndex: w.session})
	case opSessionCategory:
		op = w.c.ReadCategory(ctx, w.pid, w.otherNode(w.lastWrit), w.category(), w.known.globalFrom(), 200, client.ReadOptions{Consistency: history.Session, MinIndex: w.session})
	case opLocalStream:
		st := w.stream()
		op = w.c.ReadStream(ctx, w.pid, w.node(), st, w.known.streamFrom(st), 100, client.ReadOptions{Consistency: history.Local})
	}
	w.observe(op)
}

func (w *worker) category() string {
	if w.cfg.Name == "dcb" {
		return "course"
	}
	if w.rng.IntN(2) == 1 {
		return "order"
	}
	return "acct"
}

func (w *worker) observe(op history.Op) {
	w.known.see(op)
	switch op.Type {
	case history.Info:
		// Retire the process: its write may still apply at any time.
		w.pid += w.cfg.Concurrency
		return
	case history.Fail:
		if op.Result != nil && op.Result.Actual != nil {
			w.version[op.Value.Stream] = *op.Result.Actual
		}
		return
	}
	r := op.Result
	w.session = max(w.session, r.Index)
	switch op.F {
	case history.FAppend:
		w.version[op.Value.Stream] = r.Pos + int64(len(op.Value.IDs)) - 1
	case history.FVersion:
		w.version[op.Value.Stream] = r.Version
	}
}

// idemAppend appends 1..2 messages and, while the outcome is unknown, sends
// the same append again (same ids and data, a new process, maybe another
// node) until it is acknowledged or certainly failed. One in hedgeOneIn
// appends is also sent through a second node at the same moment.
func (w *worker) idemAppend(ctx context.Context) {
	st, n := w.stream(), 1+w.rng.IntN(2)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = w.c.NewID(w.pid)
	}
	tag := w.pid
	if w.rng.IntN(hedgeOneIn) == 0 && len(w.cfg.Nodes) > 1 {
		w.hedges++
		hp := w.cfg.Concurrency*(1<<20) + w.pid + w.cfg.Concurrency*w.hedges
		hnode := w.otherNode(w.node())
		done := make(chan history.Op, 1)
		go func() { done <- w.c.AppendTagged(ctx, hp, hnode, st, ids, nil, tag) }()
		defer func() { w.known.see(<-done) }()
	}
	for attempt := 0; attempt < idemAttempts; attempt++ {
		node := w.node()
		if attempt > 0 {
			node = w.cfg.Nodes[w.rng.IntN(len(w.cfg.Nodes))] // that one may be cut off
		}
		op := w.c.AppendTagged(ctx, w.pid, node, st, ids, nil, tag)
		w.lastWrit = node
		w.observe(op)
		if op.Type != history.Info || ctx.Err() != nil {
			return
		}
	}
}

// decide is one DCB decision: read (linearizable) the messages of a course
// and a student after what this worker read before, then append one
// carrying both tags on condition that none carrying either appeared
// after the last one read. A full page means more to read: the decision
// is left for next time.
func (w *worker) decide(ctx context.Context) {
	course, student := w.rng.IntN(dcbCourses), w.rng.IntN(dcbStudents)
	tags := []string{fmt.Sprintf("course:c%d", course), fmt.Sprintf("student:s%d", student)}
	key := tags[0] + "|" + tags[1]
	node := w.node()
	after := w.decided[key]
	read := w.c.Query(ctx, w.pid, node, tags, after, dcbPage, client.ReadOptions{Consistency: history.Linearizable})
	w.observe(read)
	if read.Type != history.OK {
		return
	}
	for _, e := range read.Result.Events {
		after = max(after, e.Global)
	}
	w.decided[key] = after
	if len(read.Result.Events) == dcbPage {
		return
	}
	op := w.c.AppendIf(ctx, w.pid, node, fmt.Sprintf("course-c%d", course), w.c.NewID(w.pid), tags, history.Condition{AnyTags: tags, After: after})
	w.lastWrit = node
	w.observe(op)
	if op.Type == history.OK {
		w.decided[key] = op.Result.Global
	}
}
