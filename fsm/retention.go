package fsm

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Retention policies (max-age, max-count); their expiry is expiry.go. See
// DESIGN.md "Retention".
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
	return &fsmv1.RetentionPolicyResult{Namespace: c.Namespace, Replaced: old != nil}
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
