package fsm

import (
	"context"
	"fmt"
)

// SetPageBytes caps the bytes of every later page read through v (see
// View); n <= 0 removes the cap.
func (v *View) SetPageBytes(n int) { v.pageBytes = max(n, 0) }

// PageCapped reports whether the last read of messages through v stopped
// early, at the page byte cap or at the scan budget: messages after its
// last one may match too. After a stop at the scan budget, ScanStopped
// says where to read on.
func (v *View) PageCapped() bool { return v.capped || v.stopped }

// LastPageBytes is the bytes the last read of messages (or positions, or
// index hits) through v put in its page, as the page byte cap counts
// them: what its reply weighs, less the reply's own fields. It is 0 when
// no page byte cap was set.
func (v *View) LastPageBytes() int { return v.lastBytes }

// SetScanBudget bounds every later read of messages through v to n
// entries examined and not returned (skipped by a filter, a state vector,
// a consumer group, a minimum global position, or a deletion); n <= 0
// removes the bound. A read that spends its budget before its page is
// full stops there: its page (perhaps empty) is a prefix of what the
// read would otherwise return, PageCapped reports true, and ScanStopped
// gives the position to read on from. This is what keeps a filtered read
// of a large namespace from costing one caller a scan of all of it.
func (v *View) SetScanBudget(n int) { v.scanBudget = max(n, 0) }

// ScanStopped reports whether the last read of messages through v stopped
// at its scan budget, and then resume: the value of the read's own start
// field that reads on, every entry before it (in the read's direction)
// examined. For ReadStream it is a stream position (Position); for
// ReadCategory and ReadAllQuery a global position (GlobalPosition; backward,
// the next lower one, 0 or less meaning nothing is left below); for Query
// the `after` argument.
func (v *View) ScanStopped() (resume int64, stopped bool) { return v.resume, v.stopped }

// SetContext makes every later read through v check ctx as it goes and
// return its error once ctx is done: a read of a large namespace ends with
// its caller's deadline instead of running on after nobody waits for it.
func (v *View) SetContext(ctx context.Context) { v.ctx = ctx }

// checkEvery is how many entries a read examines between two looks at its
// context: often enough to stop within a millisecond or so, rarely enough
// to cost nothing measurable.
const checkEvery = 256

// messageOverhead is what Size adds to a message's variable fields for
// its positions, time and encoding: about what one Message costs in a
// protobuf reply beyond its strings and bytes (field tags, lengths,
// varints, the timestamp), rounded up.
const messageOverhead = 64

// Size is the message's bytes as a page counts them: data, metadata, id,
// stream, type and tags, plus a fixed overhead for the rest. It bounds
// the message's protobuf encoding in a reply from above.
func (m *Message) Size() int {
	n := messageOverhead + len(m.ID) + len(m.Stream) + len(m.Type) + len(m.Data) + len(m.Metadata)
	for _, t := range m.Tags {
		n += len(t) + 2
	}
	return n
}

// page collects one read's messages up to a count, a byte cap and a scan
// budget.
//
// INVARIANT: bytes is the sum of the sizes room admitted (Size over
// msgs, for a read of messages), and bytes <= maxBytes unless room
// admitted a single entry (a page is never empty for want of room).
// skipped <= budget when budget > 0: a read stops (stopped, with resume
// set) at the entry that spends the budget.
type page struct {
	msgs     []Message
	limit    int // negative: no count limit
	maxBytes int // 0: no byte cap
	bytes    int
	admitted int  // entries room took
	capped   bool // an entry was refused for want of room

	ctx      context.Context // nil: never checked
	examined int             // entries looked at, returned or not
	err      error           // ctx's error, once seen

	budget  int // entries that may be skipped; 0: no bound
	skipped int
	stopped bool  // the budget is spent
	resume  int64 // where to read on once stopped
}

func (v *View) startPage(limit int) page {
	v.capped, v.stopped, v.resume, v.lastBytes = false, false, 0, 0
	return page{msgs: newPage(limit), limit: limit, maxBytes: v.pageBytes, ctx: v.ctx, budget: v.scanBudget}
}

// full reports whether the page takes no more messages: it reached its
// limit, its byte cap or its scan budget, or its context is done.
func (p *page) full() bool {
	return p.capped || p.stopped || p.err != nil || full(p.msgs, p.limit)
}

// look counts one examined entry.
func (p *page) look() { p.examine(1) }

// examine counts n examined entries and checks the context once every
// checkEvery of them.
func (p *page) examine(n int) {
	before := p.examined
	p.examined += n
	if p.ctx == nil || p.err != nil || before/checkEvery == p.examined/checkEvery {
		return
	}
	if err := p.ctx.Err(); err != nil {
		p.err = fmt.Errorf("fsm: read stopped after examining %d entries: %w", p.examined, err)
	}
}

// add appends m, unless m would take a non-empty page past its byte cap:
// then the page is capped and m is dropped.
func (p *page) add(m Message) {
	p.look()
	if p.room(m.Size()) {
		p.msgs = append(p.msgs, m)
	}
}

// room admits an entry of size bytes to the page, unless it would take a
// non-empty page past its byte cap: then the page is capped and room
// reports false. It is the one rule every read's page stops by, whatever
// its entries are (messages, index hits).
func (p *page) room(size int) bool {
	if p.maxBytes > 0 {
		if p.admitted > 0 && p.bytes+size > p.maxBytes {
			p.capped = true
			return false
		}
		p.bytes += size
	}
	p.admitted++
	return true
}

// skip counts an examined entry the read does not return; resume is where
// the read goes on after it (the next entry's position in the read's
// direction, in the read's own terms: see ScanStopped). When that spends
// the budget, the page stops there.
func (p *page) skip(resume int64) {
	p.look()
	p.skipped++
	p.spent(resume)
}

// charge counts n entries a join examined on its way to a candidate as
// skipped. It never stops the read by itself: the candidate is taken or
// skipped first (spent), so a read always moves past it.
func (p *page) charge(n int) {
	p.examine(n)
	p.skipped += n
}

// spent stops the page when the budget is spent, resume being where the
// read goes on.
func (p *page) spent(resume int64) {
	if p.budget > 0 && p.skipped >= p.budget {
		p.stopped, p.resume = true, resume
	}
}

// done returns the page's messages and records how the read ended; err
// (an iterator's) comes before the context's.
func (v *View) done(p *page, err error) ([]Message, error) {
	v.capped, v.stopped, v.resume, v.lastBytes = p.capped, p.stopped, p.resume, p.bytes
	if err == nil {
		err = p.err
	}
	if err != nil {
		return nil, err
	}
	return p.msgs, nil
}
