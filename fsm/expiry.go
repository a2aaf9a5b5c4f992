package fsm

import (
	"encoding/binary"
	"sort"

	"github.com/cockroachdb/pebble/v2"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Expiry: the apply of an ExpireMessages entry, which removes what the
// namespace's retention policies (retention.go) make due at the entry's
// time. See DESIGN.md "Retention".

// expireMessages applies an ExpireMessages entry: the count pass over the
// expiry queue, then each age limit, within the entry's bound.
func (a *applier) expireMessages(l *Entry, c *fsmv1.ExpireMessages) any {
	nb, skipped, done := a.target(l, c.Namespace)
	if done {
		return skipped
	}
	if c.MaxMessages < 0 {
		return invalid("max_messages", "must be 0 (no bound) or more, got %d", c.MaxMessages)
	}
	res := &fsmv1.ExpiryResult{Namespace: c.Namespace}
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
	res     *fsmv1.ExpiryResult
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
