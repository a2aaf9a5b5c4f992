package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Retention policies (max-age, max-count) and their expiry. See DESIGN.md
// "Retention".
//
// A policy is stored in its namespace's database (RP scope name ->
// RetentionPolicy), so it is replayed, checkpointed and dropped together
// with the messages it governs: the policies an entry sees always match
// that database's applied index. _metadata keeps only a hint (RN name) of
// which namespaces have policies, read by the leader to choose where to
// propose ExpireMessages entries; apply never decides anything from it.
//
// Expiry is decided inside apply from ExpireMessages.time_unix_nano (the
// leader's clock), never from a replica's:
//
//   - max-count: an append to a stream covered by a count limit N whose
//     version reaches N stages an RQ stream key (the queue) in its own
//     batch. The next ExpireMessages walks the queue and removes each
//     queued stream's positions up to version - N, then clears the queue:
//     O(streams written since the last expiry + removed messages).
//     Setting a count policy queues the streams of its scope already over
//     it (a walk of the scope's VI keys, once, at the change).
//   - max-age: per policy, a walk from the first surviving message of its
//     scope (M for the namespace, the category's CI keys, the stream's SI
//     keys) in global order, reading each message's time, stopping at the
//     first one younger than the cutoff: O(removed messages + 1) per
//     policy. Times follow global order except when a new leader's clock is
//     behind the old one's; a message behind a younger one then waits
//     until that one expires too (expiry never removes a message younger
//     than the limit, it may keep one a little older).
//
// Every removal goes through removeRange (streamdelete.go): range
// deletions of a stream's prefix, counters updated in the same batch.

// Limits of retention policies.
const (
	// MaxRetentionPolicies bounds the policies of one namespace.
	MaxRetentionPolicies = 1000
	// DefaultExpireBatch is what the leader proposes as
	// ExpireMessages.max_messages: one entry's apply stays short (about
	// 9 ms for 10,000 aged-out messages, and up to about 0.5 s for 10,000
	// capped streams of one message each read from disk: BenchmarkExpire,
	// BenchmarkSetCountPolicy), and the rest is removed by the next ones.
	DefaultExpireBatch = 10_000
)

// RetentionPolicyResult is the result of a SetRetentionPolicy.
type RetentionPolicyResult struct {
	Namespace string
	Replaced  bool // the scope had a policy before
	Index     uint64
}

// ExpiryResult is the result of an ExpireMessages.
type ExpiryResult struct {
	Namespace       string
	MessagesDeleted int64
	Streams         int64 // streams that lost at least one message
	More            bool  // stopped at max_messages: more may be due
	Index           uint64
}

// retention is a namespace's policies in memory, loaded with its database
// and changed by apply (owned by the holder of Store.applyMu).
type retention struct {
	ns      *fsmv1.RetentionPolicy
	cats    map[string]*fsmv1.RetentionPolicy
	streams map[string]*fsmv1.RetentionPolicy
	counted bool // some policy has a count limit: appends check the queue rule
}

func (r *retention) len() int {
	if r == nil {
		return 0
	}
	n := len(r.cats) + len(r.streams)
	if r.ns != nil {
		n++
	}
	return n
}

// get returns the policy of a scope, nil when it has none.
func (r *retention) get(scope fsmv1.RetentionScope, name string) *fsmv1.RetentionPolicy {
	if r == nil {
		return nil
	}
	switch scope {
	case fsmv1.RetentionScope_RETENTION_SCOPE_NAMESPACE:
		return r.ns
	case fsmv1.RetentionScope_RETENTION_SCOPE_CATEGORY:
		return r.cats[name]
	default:
		return r.streams[name]
	}
}

// put sets (p with a limit) or removes (p without one) a scope's policy.
func (r *retention) put(p *fsmv1.RetentionPolicy) {
	scope, name := p.Scope, p.Name
	if !hasLimit(p) {
		p = nil
	}
	switch scope {
	case fsmv1.RetentionScope_RETENTION_SCOPE_NAMESPACE:
		r.ns = p
	case fsmv1.RetentionScope_RETENTION_SCOPE_CATEGORY:
		if r.cats == nil {
			r.cats = map[string]*fsmv1.RetentionPolicy{}
		}
		r.cats[name] = p
	default:
		if r.streams == nil {
			r.streams = map[string]*fsmv1.RetentionPolicy{}
		}
		r.streams[name] = p
	}
	r.tidy()
}

// tidy drops removed entries and recomputes counted.
func (r *retention) tidy() {
	r.counted = r.ns.GetMaxCount() > 0
	for _, m := range []map[string]*fsmv1.RetentionPolicy{r.cats, r.streams} {
		for k, p := range m {
			if p == nil {
				delete(m, k)
			} else if p.MaxCount > 0 {
				r.counted = true
			}
		}
	}
}

func hasLimit(p *fsmv1.RetentionPolicy) bool {
	return p != nil && (p.MaxAgeNanos > 0 || p.MaxCount > 0)
}

// maxCount is the strictest count limit covering stream (0: none).
func (r *retention) maxCount(stream string) int64 {
	if r == nil || !r.counted {
		return 0
	}
	var n int64
	for _, p := range []*fsmv1.RetentionPolicy{r.ns, r.cats[Category(stream)], r.streams[stream]} {
		if c := p.GetMaxCount(); c > 0 && (n == 0 || c < n) {
			n = c
		}
	}
	return n
}

// ValidateRetentionPolicy checks a policy as apply does (the API edge
// calls it to refuse before proposing).
func ValidateRetentionPolicy(p *fsmv1.RetentionPolicy) error {
	if p == nil {
		return invalid("policy", "is required")
	}
	switch p.Scope {
	case fsmv1.RetentionScope_RETENTION_SCOPE_NAMESPACE:
		if p.Name != "" {
			return invalid("policy.name", "must be empty for the namespace scope, got %q", p.Name)
		}
	case fsmv1.RetentionScope_RETENTION_SCOPE_CATEGORY:
		if err := ValidateStreamName("policy.name", p.Name); err != nil {
			return err
		}
		if strings.Contains(p.Name, "-") {
			return invalid("policy.name", "a category has no '-': %q names a stream", p.Name)
		}
	case fsmv1.RetentionScope_RETENTION_SCOPE_STREAM:
		if err := ValidateStreamName("policy.name", p.Name); err != nil {
			return err
		}
	default:
		return invalid("policy.scope", "must be namespace, category or stream, got %v", p.Scope)
	}
	if p.MaxAgeNanos < 0 {
		return invalid("policy.max_age", "must be 0 (no limit) or more, got %dns", p.MaxAgeNanos)
	}
	if p.MaxCount < 0 {
		return invalid("policy.max_count", "must be 0 (no limit) or more, got %d", p.MaxCount)
	}
	return nil
}

// retentionKey is RP scope-byte name.
func retentionKey(scope fsmv1.RetentionScope, name string) []byte {
	k := append(append(make([]byte, 0, len(prefixRetention)+1+len(name)), prefixRetention...), byte('0'+scope))
	return append(k, name...)
}

func expiryQueueKey(stream string) []byte {
	return append(append(make([]byte, 0, len(prefixExpiryQueue)+len(stream)), prefixExpiryQueue...), stream...)
}

func retainedKey(namespace string) []byte {
	return append(append(make([]byte, 0, len(prefixRetained)+len(namespace)), prefixRetained...), namespace...)
}

// loadRetention reads a namespace database's policies (nil: none).
func loadRetention(r pebble.Reader) (*retention, error) {
	ps, err := readPolicies(r)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	rt := &retention{}
	for _, p := range ps {
		rt.put(p)
	}
	return rt, nil
}

// readPolicies lists the RP records of r in key order: namespace, then
// categories, then streams, each by name.
func readPolicies(r pebble.Reader) ([]*fsmv1.RetentionPolicy, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefixRetention, UpperBound: prefixEnd(prefixRetention)})
	if err != nil {
		return nil, err
	}
	var out []*fsmv1.RetentionPolicy
	for ok := it.First(); ok; ok = it.Next() {
		p := &fsmv1.RetentionPolicy{}
		if err := proto.Unmarshal(it.Value(), p); err != nil {
			it.Close()
			return nil, fmt.Errorf("retention policy %q: %w", it.Key(), err)
		}
		out = append(out, p)
	}
	return out, it.Close()
}

// RetentionPolicies lists the viewed namespace's policies: the namespace's
// first, then categories', then streams', each by name.
func (v *View) RetentionPolicies() ([]*fsmv1.RetentionPolicy, error) {
	ps, err := readPolicies(v.snap)
	if err != nil {
		return nil, fmt.Errorf("fsm: namespace %q: %w", v.ns.rec.Name, err)
	}
	return ps, nil
}

// RetainedNamespaces lists, by name, the namespaces that have a retention
// policy: where the leader proposes ExpireMessages entries. It is a hint
// kept in _metadata; apply decides from each namespace's own records.
func (s *Store) RetainedNamespaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.mu.retained))
	for name := range s.mu.retained {
		if _, ok := s.mu.namespaces[name]; ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (a *applier) setRetentionPolicy(l *Entry, c *fsmv1.SetRetentionPolicy) any {
	if err := ValidateRetentionPolicy(c.Policy); err != nil {
		return err
	}
	ns := a.lookup(c.Namespace)
	nb, skipped, done := a.target(l, c.Namespace)
	// The hint follows, in _metadata under its own skip rule, whether the
	// namespace has policies once the entry is applied (target opened its
	// database, so they are loaded even when the namespace part is
	// skipped).
	defer func() {
		if ns != nil && a.touchMeta(l) {
			a.retainedHint(c.Namespace, ns.retention != nil)
		}
	}()
	if done {
		return skipped
	}
	p := proto.Clone(c.Policy).(*fsmv1.RetentionPolicy)
	rt := nb.ns.retention
	old := rt.get(p.Scope, p.Name)
	if hasLimit(p) && old == nil && rt.len() >= MaxRetentionPolicies {
		return invalid("policy", "the namespace has %d policies, the most it may have", rt.len())
	}
	// Queue before staging anything of this entry: the walk commits the
	// batch so far, and a commit holding part of this entry without its
	// applied index would be replayed after a crash against its own half
	// (the policy already stored, so the streams never queued).
	if p.MaxCount > 0 && p.MaxCount != old.GetMaxCount() {
		a.queueScope(nb, p)
	}
	if !hasLimit(p) {
		if old != nil {
			// A set of the same key staged earlier in this batch would
			// land after a direct delete: commit it first.
			a.flush(nb)
			a.deleteKeys(nb, retentionKey(p.Scope, p.Name))
		}
	} else {
		v, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		if err != nil {
			a.fatal("encode retention policy: %v", err)
		}
		nb.sets.set(retentionKey(p.Scope, p.Name), v)
	}
	if rt == nil {
		rt = &retention{}
		nb.ns.retention = rt
	}
	rt.put(p)
	if rt.len() == 0 {
		nb.ns.retention = nil
	}
	nb.done(l)
	return &RetentionPolicyResult{Namespace: c.Namespace, Replaced: old != nil, Index: l.Index}
}

// retainedHint records in _metadata (and in memory at commit) whether a
// namespace has policies.
func (a *applier) retainedHint(name string, on bool) {
	if on {
		if err := a.meta.Set(retainedKey(name), nil, nil); err != nil {
			a.fatal("stage retention hint: %v", err)
		}
	} else if err := a.meta.Delete(retainedKey(name), nil); err != nil {
		a.fatal("stage retention hint: %v", err)
	}
	if a.retained == nil {
		a.retained = map[string]bool{}
	}
	a.retained[name] = on
}

// queueScope queues the streams of p's scope whose version reaches its
// count limit: a walk of the scope's VI keys, once, when the limit is set
// or changed. Staged VI changes of this batch are committed first, so it
// must run before the entry stages anything of its own.
func (a *applier) queueScope(nb *nsBatch, p *fsmv1.RetentionPolicy) {
	if p.Scope == fsmv1.RetentionScope_RETENTION_SCOPE_STREAM {
		if st := nb.stream(p.Name); st.meta.count > 0 && st.meta.lastPos+1 > p.MaxCount {
			nb.sets.set(expiryQueueKey(p.Name), nil)
		}
		return
	}
	a.flush(nb)
	var ranges [][2][]byte
	if p.Scope == fsmv1.RetentionScope_RETENTION_SCOPE_NAMESPACE {
		ranges = append(ranges, [2][]byte{prefixVersion, prefixEnd(prefixVersion)})
	} else {
		exact := versionKey(p.Name)
		ranges = append(ranges, [2][]byte{exact, append(bytes.Clone(exact), 0)})
		lo := versionKey(p.Name + "-")
		ranges = append(ranges, [2][]byte{lo, prefixEnd(lo)})
	}
	for _, r := range ranges {
		it, err := nb.ns.db.NewIter(&pebble.IterOptions{LowerBound: r[0], UpperBound: r[1]})
		if err != nil {
			a.fatal("namespace %q: queue scope: %v", nb.ns.rec.Name, err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			m, err := decodeStreamMeta(it.Value())
			if err != nil {
				a.fatal("namespace %q: version %q: %v", nb.ns.rec.Name, it.Key(), err)
			}
			if m.count > 0 && m.lastPos+1 > p.MaxCount {
				nb.sets.set(expiryQueueKey(string(it.Key()[len(prefixVersion):])), nil)
			}
		}
		if err := it.Close(); err != nil {
			a.fatal("namespace %q: queue scope: %v", nb.ns.rec.Name, err)
		}
	}
}

// queueIfCapped stages stream in the expiry queue when a count limit
// covers it and its version reaches the limit (positions below the kept
// window exist). Called after every write to a stream.
func (nb *nsBatch) queueIfCapped(stream string, st *streamState) {
	if n := nb.ns.retention.maxCount(stream); n > 0 && st.meta.lastPos+1 > n {
		nb.sets.set(expiryQueueKey(stream), nil)
	}
}

func (a *applier) expireMessages(l *Entry, c *fsmv1.ExpireMessages) any {
	nb, skipped, done := a.target(l, c.Namespace)
	if done {
		return skipped
	}
	if c.MaxMessages < 0 {
		return invalid("max_messages", "must be 0 (no bound) or more, got %d", c.MaxMessages)
	}
	res := &ExpiryResult{Namespace: c.Namespace, Index: l.Index}
	rt := nb.ns.retention
	if rt.len() > 0 {
		e := &expiry{a: a, nb: nb, res: res, budget: c.MaxMessages, touched: map[string]bool{},
			oneTooMany: expireOneTooMany(l), index: l.Index}
		a.flush(nb)
		e.resume()
		e.counts()
		e.ages(rt, c.TimeUnixNano, expireAgeEarly(l))
		res.Streams = int64(len(e.touched))
		a.deleteKeys(nb, keyExpiryProgress) // with the applied index
	}
	nb.done(l)
	a.flush(nb)
	return res
}

// expiry is the state of one ExpireMessages apply.
//
// An expiry commits between its walks (so that each walk reads what the
// last removed), before the entry's applied index is stored with its last
// commit. Each of those commits also stores how much of the entry's bound
// was used (keyExpiryProgress), and a replay of the entry after a crash
// between them starts from there (resume): the messages the first run
// removed are gone, the bound goes on where it stood, and the replay ends
// where a node that never crashed ends.
type expiry struct {
	a       *applier
	nb      *nsBatch
	index   uint64 // the entry's
	res     *ExpiryResult
	budget  int64 // 0: unbounded; counts removed messages and queued streams visited
	visited int64 // queued streams the count pass visited
	touched map[string]bool
	// oneTooMany is the expire-one-too-many mutant's bug (only in
	// binaries built with -tags mutants, and only when the leader asked).
	oneTooMany bool
}

// resume restores how much of its bound this entry used before a crash
// cut it between two of its commits.
func (e *expiry) resume() {
	v, err := get(e.nb.ns.db, keyExpiryProgress)
	if err != nil {
		e.a.fatal("namespace %q: read expiry progress: %v", e.nb.ns.rec.Name, err)
	}
	if v == nil {
		return
	}
	if len(v) != 24 {
		e.a.fatal("namespace %q: expiry progress: %v", e.nb.ns.rec.Name, errCorruptValue)
	}
	if binary.BigEndian.Uint64(v) == e.index {
		e.res.MessagesDeleted = int64(binary.BigEndian.Uint64(v[8:]))
		e.visited = int64(binary.BigEndian.Uint64(v[16:]))
	}
}

// commit commits what the entry removed so far, with its progress.
func (e *expiry) commit() {
	v := appendUint64(appendUint64(appendUint64(make([]byte, 0, 24), e.index), uint64(e.res.MessagesDeleted)), uint64(e.visited))
	if err := e.nb.b.Set(keyExpiryProgress, v, nil); err != nil {
		e.a.fatal("stage expiry progress: %v", err)
	}
	e.a.flush(e.nb)
}

// full reports whether the entry's bound is reached.
func (e *expiry) full() bool {
	if e.budget > 0 && e.res.MessagesDeleted+e.visited >= e.budget {
		e.res.More = true
		return true
	}
	return false
}

// remove removes stream's messages below before (committing after, so the
// next walk reads the result).
func (e *expiry) remove(stream string, before int64) {
	st := e.nb.stream(stream)
	if st.meta.count == 0 || before <= 0 {
		return
	}
	before = min(before, st.meta.lastPos+1)
	if e.oneTooMany {
		before++ // the mutant's bug: one message too many
	}
	n := e.a.removeRange(e.nb, stream, before)
	if n == 0 {
		return
	}
	e.a.removed(e.nb, stream, n, 0)
	e.res.MessagesDeleted += n
	e.touched[stream] = true
}

// counts drains the expiry queue: each queued stream loses the positions
// at or below its version - its strictest count limit. A stream left over
// when the bound is reached stays queued.
func (e *expiry) counts() {
	var queued []string
	it, err := e.nb.ns.db.NewIter(&pebble.IterOptions{LowerBound: prefixExpiryQueue, UpperBound: prefixEnd(prefixExpiryQueue)})
	if err != nil {
		e.a.fatal("namespace %q: expiry queue: %v", e.nb.ns.rec.Name, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		queued = append(queued, string(it.Key()[len(prefixExpiryQueue):]))
	}
	if err := it.Close(); err != nil {
		e.a.fatal("namespace %q: expiry queue: %v", e.nb.ns.rec.Name, err)
	}
	done := 0
	for _, stream := range queued {
		if e.full() {
			break
		}
		if n := e.nb.ns.retention.maxCount(stream); n > 0 {
			e.remove(stream, e.nb.stream(stream).meta.lastPos+1-n)
		}
		e.visited++
		done++
	}
	switch {
	case done == len(queued) && done > 0:
		e.a.deleteRange(e.nb, prefixExpiryQueue, prefixEnd(prefixExpiryQueue))
	case done > 0:
		e.a.deleteRange(e.nb, prefixExpiryQueue, expiryQueueKey(queued[done]))
	}
	e.commit()
}

// ages applies each age limit at time now: the namespace's over M, each
// category's over its CI keys, each stream's over its SI keys. early is
// the expire-age-early mutant's bug (limits count half).
func (e *expiry) ages(rt *retention, now int64, early bool) {
	cutoff := func(age int64) int64 {
		if early {
			age /= 2
		}
		return now - age
	}
	if rt.ns.GetMaxAgeNanos() > 0 {
		e.age(cutoff(rt.ns.MaxAgeNanos), prefixMessage, prefixEnd(prefixMessage), walkMessages)
	}
	for _, name := range sortedKeys(rt.cats) {
		if p := rt.cats[name]; p.MaxAgeNanos > 0 {
			lo := categoryPrefix(name)
			e.age(cutoff(p.MaxAgeNanos), lo, prefixEnd(lo), walkCategory)
		}
	}
	for _, name := range sortedKeys(rt.streams) {
		if p := rt.streams[name]; p.MaxAgeNanos > 0 {
			lo := streamPrefix(name)
			e.age(cutoff(p.MaxAgeNanos), lo, prefixEnd(lo), walkStream)
		}
	}
}

// What an age walk iterates: M keys (the message is the value), a
// category's CI keys (the global position ends the key) or a stream's SI
// keys (the global position is the value).
const (
	walkMessages = iota
	walkCategory
	walkStream
)

// age walks keys [lo, hi) in global order while the message is older than
// cutoff, then removes, per stream, the prefix up to the last old message.
func (e *expiry) age(cutoff int64, lo, hi []byte, walk int) {
	if e.full() {
		return
	}
	db := e.nb.ns.db
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		e.a.fatal("namespace %q: expiry walk: %v", e.nb.ns.rec.Name, err)
	}
	before := map[string]int64{} // stream -> first position kept
	var order []string
	seen := int64(0)
	for ok := it.First(); ok; ok = it.Next() {
		v, gp := it.Value(), int64(0)
		if walk == walkMessages {
			gp = keySuffixUint64(it.Key())
		} else {
			var err error
			gp = keySuffixUint64(it.Key())
			if walk == walkStream {
				gp, err = decodeUint64(v)
			}
			if err != nil {
				e.a.fatal("namespace %q: index key %q: %v", e.nb.ns.rec.Name, it.Key(), err)
			}
			if v, err = get(db, messageKey(gp)); err != nil || v == nil {
				e.a.fatal("namespace %q: message %d: %v (missing: %t)", e.nb.ns.rec.Name, gp, err, v == nil)
			}
		}
		m, err := decodeMessage(gp, v)
		if err != nil {
			e.a.fatal("namespace %q: %v", e.nb.ns.rec.Name, err)
		}
		if m.Time >= cutoff {
			break
		}
		if _, ok := before[m.Stream]; !ok {
			order = append(order, m.Stream)
		}
		before[m.Stream] = m.Position + 1
		if seen++; e.budget > 0 && e.res.MessagesDeleted+e.visited+seen >= e.budget {
			e.res.More = true
			break
		}
	}
	if err := it.Close(); err != nil {
		e.a.fatal("namespace %q: expiry walk: %v", e.nb.ns.rec.Name, err)
	}
	sort.Strings(order)
	for _, stream := range order {
		e.remove(stream, before[stream])
	}
	e.commit()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
