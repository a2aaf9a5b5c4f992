package fsm

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// Queries (DCB) read the namespace's type and tag indexes:
//
//	QA type 0x00 gp -> empty   one key per message, once the type index is complete (typeindex.go)
//	QT type 0x00 gp -> empty   one key per tagged message, in a legacy namespace
//	QG tag 0x00 gp  -> empty   one key per tag of a message
//
// A namespace whose type index is complete reads types from QA, so a
// query or condition of types alone sees untagged messages too; a legacy
// namespace (written before QA, until IndexTypes entries backfill it)
// reads QT, which holds tagged messages only. The type key costs an
// untagged append one more key (fsm/DESIGN.md, Numbers).
//
// Each index is a sorted list of global positions (a posting list). A
// query item is the intersection of the union of its types' lists with
// each of its tags' lists, and a query is the union of its items, merged
// lazily: a leapfrog join whose intersections seek every list to the
// largest position any of them reached. A read costs O(matches x lists x
// a seek), never a scan of the namespace, and needs no key per tag
// subset.
//
// Index keys outlive the messages the deletion paths remove (they do not
// read the messages, so they do not know their tags): a candidate whose M
// key is gone is skipped. Global positions are never reused (an import's
// clear deletes the index with everything else), so a dangling entry
// never names another message.

// postings yields ascending global positions.
//
// INVARIANT: the targets of successive seek calls never decrease, so an
// answer at or above the new target is still the right one.
type postings interface {
	// seek returns the first position at or above gp; ok is false when
	// there is none.
	seek(gp int64) (pos int64, ok bool, err error)
}

// iterReader is what a query reads: a database or a snapshot of one.
type iterReader interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}

// indexList is the posting list of one type or tag.
type indexList struct {
	it   *pebble.Iterator
	key  []byte // seek key: the prefix, then 8 bytes
	plen int
	cur  int64 // the last answer; 0 before the first
	done bool
}

func (l *indexList) seek(gp int64) (int64, bool, error) {
	if l.done {
		return 0, false, nil
	}
	if l.cur != 0 {
		if l.cur >= gp {
			return l.cur, true, nil
		}
		// The next entry is usually the answer (a list read alone, or
		// the rarest of an intersection): a Next is far cheaper than a
		// seek, which follows only when it falls short.
		if !l.it.Next() {
			l.done = true
			return 0, false, l.it.Error()
		}
		if l.cur = keySuffixUint64(l.it.Key()); l.cur >= gp {
			return l.cur, true, nil
		}
	}
	l.key = appendUint64(l.key[:l.plen], uint64(gp))
	if !l.it.SeekGE(l.key) {
		l.done = true
		return 0, false, l.it.Error()
	}
	l.cur = keySuffixUint64(l.it.Key())
	return l.cur, true, nil
}

// union yields the positions of any of its lists.
type union []postings

func (u union) seek(gp int64) (int64, bool, error) {
	best, found := int64(0), false
	for _, p := range u {
		pos, ok, err := p.seek(gp)
		if err != nil {
			return 0, false, err
		}
		if ok && (!found || pos < best) {
			best, found = pos, true
		}
	}
	return best, found, nil
}

// intersection yields the positions every one of its lists holds.
//
// With a round bound (a read's, never apply's), a seek that has not
// brought its lists to agree within maxRounds rounds answers the position
// it reached: a candidate only, which the caller must check against the
// query (Query.matches). Everything below it is proven to hold no match,
// so a read that goes on above it loses nothing and moves forward.
type intersection struct {
	lists     []postings
	maxRounds int  // 0: no bound
	rounds    *int // rounds spent in every seek of the plan
}

func (x intersection) seek(gp int64) (int64, bool, error) {
	target := gp
	for round := 1; ; round++ {
		agreed := true
		for _, p := range x.lists {
			pos, ok, err := p.seek(target)
			if err != nil || !ok {
				return 0, false, err
			}
			if pos > target {
				target, agreed = pos, false
				break
			}
		}
		if agreed {
			return target, true, nil
		}
		*x.rounds++
		if x.maxRounds > 0 && round >= x.maxRounds {
			return target, true, nil // a candidate: see intersection
		}
	}
}

// queryPlan is an opened query: its postings and the iterators to close.
type queryPlan struct {
	root  postings
	iters []*pebble.Iterator
	// rounds counts the intersections' rounds that found no match.
	rounds int
	// bounded: the intersections answer candidates after maxRounds.
	bounded bool
}

// openQuery opens one index iterator per type and tag of each item, its
// types read from QA (all: the namespace's type index is complete) or QT.
// The query must be valid (ValidateQuery). With maxRounds above 0 its
// intersections answer unchecked candidates after that many rounds (see
// intersection): a read's bound; apply's condition checks pass 0. Close
// the plan.
func openQuery(r iterReader, q Query, all bool, maxRounds int) (*queryPlan, error) {
	typeFamily := prefixTypeIdx
	if all {
		typeFamily = prefixTypeAll
	}
	qp := &queryPlan{bounded: maxRounds > 0}
	// Each use of a name gets its own iterator: a list shared by two
	// items would see their seeks interleaved, breaking the invariant.
	list := func(family []byte, name string) (postings, error) {
		p := indexPrefix(family, name)
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return nil, err
		}
		qp.iters = append(qp.iters, it)
		return &indexList{it: it, key: p, plen: len(p)}, nil
	}
	items := make(union, 0, len(q.Items))
	for _, item := range q.Items {
		// Tags first: usually far rarer than types, so the join's first
		// seeks land on few candidates (and an unused tag ends it at once).
		parts := intersection{maxRounds: maxRounds, rounds: &qp.rounds}
		for _, t := range dedupe(item.Tags) {
			l, err := list(prefixTagIdx, t)
			if err != nil {
				return nil, errors.Join(err, qp.close())
			}
			parts.lists = append(parts.lists, l)
		}
		if len(item.Types) > 0 {
			types := make(union, 0, len(item.Types))
			for _, t := range dedupe(item.Types) {
				l, err := list(typeFamily, t)
				if err != nil {
					return nil, errors.Join(err, qp.close())
				}
				types = append(types, l)
			}
			parts.lists = append(parts.lists, one(types))
		}
		if len(parts.lists) == 1 {
			items = append(items, parts.lists[0])
		} else {
			items = append(items, parts)
		}
	}
	qp.root = one(items)
	return qp, nil
}

// one is u itself, or its only list.
func one(u union) postings {
	if len(u) == 1 {
		return u[0]
	}
	return u
}

func dedupe(names []string) []string {
	out := names[:0:0]
	for i, n := range names {
		seen := false
		for _, m := range names[:i] {
			seen = seen || m == n
		}
		if !seen {
			out = append(out, n)
		}
	}
	return out
}

func (qp *queryPlan) close() error {
	var errs []error
	for _, it := range qp.iters {
		errs = append(errs, it.Close())
	}
	return errors.Join(errs...)
}

// Query returns the messages matching q whose global position is above
// after, in global order, at most limit (0 means DefaultLimit, negative
// unlimited). q must be valid (ValidateQuery).
func (v *View) Query(q Query, after int64, limit int) (out []Message, err error) {
	ti, err := v.typeIndex()
	if err != nil {
		return nil, err
	}
	return v.query(q, after, normLimit(limit), ti.complete(), nil)
}

// query is Query through the complete type index (all) or the legacy one,
// keeping the matches keep accepts (nil: every one). With a scan budget
// the intersections are bounded (openQuery) and every rejected candidate
// and fruitless round is charged to it.
func (v *View) query(q Query, after int64, limit int, all bool, keep func(*Message) bool) (out []Message, err error) {
	maxRounds := 0
	if v.scanBudget > 0 {
		maxRounds = checkEvery
	}
	qp, err := openQuery(v.snap, q, all, maxRounds)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, qp.close()) }()
	p := v.startPage(limit)
	for next := max(after, 0) + 1; !p.full(); {
		gp, ok, err := qp.root.seek(next)
		if err != nil || !ok {
			return v.done(&p, err)
		}
		p.charge(qp.rounds)
		qp.rounds = 0
		m, found, err := v.lookupMessage(gp)
		if err != nil {
			return nil, err
		}
		switch {
		case !found: // removed by a deletion: its index entries stay
			p.skip(gp)
		case qp.bounded && !q.matches(m.Type, m.Tags, all): // a candidate only
			p.skip(gp)
		case keep != nil && !keep(&m):
			p.skip(gp)
		default:
			p.add(m)
			p.spent(gp)
		}
		next = gp + 1
	}
	return v.done(&p, nil)
}
