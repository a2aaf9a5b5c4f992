package fsm

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Read limits (spec: batch default 1000, -1 unlimited, at most 10000; the
// API edge rejects larger values, the store honours any).
const (
	DefaultLimit       = 1000
	MaxLimit           = 10000
	DefaultStreamsPage = 100
	MaxStreamsPage     = 1000
	// MaxCategoriesPage bounds one ListCategories page (and its default).
	MaxCategoriesPage = 1000
)

// Message is a stored message as reads return it.
type Message struct {
	ID             string
	Stream         string
	Type           string
	Position       int64
	GlobalPosition int64
	Data           []byte // JSON object
	Metadata       []byte // JSON object, or nil for null
	Time           int64  // unix ns, leader clock
	Tags           []string
}

// View is a consistent read-only view of one namespace: every read through
// it sees the same committed state, whatever apply does meanwhile. A View is
// not safe for concurrent use; Close it when done (it pins the database
// open and its snapshot holds back compaction).
//
// Pages: with SetPageBytes, every read of messages through the view
// (ReadStream, ReadCategory, ReadAll, Query) returns at most that many
// bytes of messages (Message.Size), and always at least one message when
// one matches: a page stops before the message that would take it past
// the cap, and PageCapped then reports true. A capped page is a prefix of
// what the read would otherwise return, so a caller continues after its
// last message as after a page that reached its limit.
type View struct {
	s         *Store
	ns        *namespace
	snap      *pebble.Snapshot
	mit       *pebble.Iterator // lazily opened iterator over M
	mgp       int64            // global position mit is at; 0 when unpositioned
	pageBytes int              // SetPageBytes; 0 means no cap
	capped    bool             // the last read of messages stopped at pageBytes
	lastBytes int              // what the last read's page weighed (LastPageBytes)

	ctx        context.Context // SetContext; nil: reads never look
	scanBudget int             // SetScanBudget; 0 means no bound
	stopped    bool            // the last read of messages spent scanBudget
	resume     int64           // where that read goes on (ScanStopped)

	// covered is the namespace's index coverage loaded before snap was
	// taken, so it never claims entries the snapshot lacks.
	covered uint64
	// coveredBy is the per-index coverage (index id -> applied index),
	// loaded with covered.
	coveredBy map[uint64]uint64
	// memSnap is a snapshot of the namespace's memory index store, taken
	// before snap (nil when it has none); memIDs the indexes it holds.
	memSnap *pebble.Snapshot
	memIDs  map[uint64]bool

	decoded int64 // stored bytes of the messages decoded (DecodedBytes)
}

// DecodedBytes is the stored bytes of every message decoded through v so
// far: what its reads cost in payload, returned or not.
func (v *View) DecodedBytes() int64 { return v.decoded }

// View opens a consistent view of namespace name.
func (s *Store) View(name string) (*View, error) {
	ns, err := s.acquire(name)
	if err != nil {
		return nil, err
	}
	covered, byIndex := ns.indexer.covered.Load(), ns.indexer.coverage()
	// The memory store first: it never holds entries of messages the
	// namespace's snapshot lacks (indexmem.go).
	memSnap, memIDs := ns.memIdx.snapshot()
	return &View{s: s, ns: ns, covered: covered, coveredBy: byIndex, memSnap: memSnap, memIDs: memIDs, snap: ns.db.NewSnapshot()}, nil
}

// Namespace returns the registry entry of the viewed namespace.
func (v *View) Namespace() NamespaceInfo { return infoOf(v.ns.rec) }

// Close releases the view.
func (v *View) Close() error {
	var err error
	if v.mit != nil {
		err = v.mit.Close()
	}
	if cerr := v.snap.Close(); err == nil {
		err = cerr
	}
	if v.memSnap != nil {
		if cerr := v.memSnap.Close(); err == nil {
			err = cerr
		}
	}
	v.s.release(v.ns)
	return err
}

func (v *View) iter(lower, upper []byte) (*pebble.Iterator, error) {
	if v.memSnap != nil && v.ns.memIdx.routes(v.memIDs, lower) {
		return v.memSnap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper}) // indexmem.go
	}
	return v.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
}

// walk is an iterator's direction: forward (First, Next) or backward
// (Last, Prev) over its bounds.
type walk struct {
	it       *pebble.Iterator
	backward bool
}

func (w walk) first() bool {
	if w.backward {
		return w.it.Last()
	}
	return w.it.First()
}

func (w walk) next() bool {
	if w.backward {
		return w.it.Prev()
	}
	return w.it.Next()
}

// nextPosition is the position after pos in a read's direction.
func nextPosition(pos int64, backward bool) int64 {
	if backward {
		return pos - 1
	}
	return pos + 1
}

func normLimit(limit int) int {
	switch {
	case limit == 0:
		return DefaultLimit
	case limit < 0:
		return -1
	}
	return limit
}

func full(out []Message, limit int) bool { return limit >= 0 && len(out) >= limit }

// newPage returns an empty page. A small explicit limit (a client paging
// by 100) gets its room up front: growing the slice one doubling at a time
// copied every message about twice over (BenchmarkReadStream100 -13 %). A
// large or default limit starts small, as a subscriber woken for one new
// message must not allocate a page of hundreds.
func newPage(limit int) []Message {
	if limit > 0 && limit <= 128 {
		return make([]Message, 0, limit)
	}
	return []Message{}
}

// message reads the message at global position gp, which an index names:
// its absence is corruption.
func (v *View) message(gp int64) (Message, error) {
	m, found, err := v.lookupMessage(gp)
	if err == nil && !found {
		err = fmt.Errorf("fsm: namespace %q: message %d is indexed but missing: %w", v.ns.rec.Name, gp, errCorruptValue)
	}
	return m, err
}

// lookupMessage reads the message at global position gp; found is false
// when there is none.
func (v *View) lookupMessage(gp int64) (m Message, found bool, err error) {
	if v.mit == nil {
		it, err := v.iter(prefixMessage, prefixEnd(prefixMessage))
		if err != nil {
			return Message{}, false, err
		}
		v.mit = it
	}
	key := messageKey(gp)
	// A stream's messages are mostly appended together, so the next one
	// asked for is usually the next key: a Next is far cheaper than a seek.
	var ok bool
	if v.mgp > 0 && gp == v.mgp+1 {
		ok = v.mit.Next()
	} else {
		ok = v.mit.SeekGE(key)
	}
	v.mgp = 0
	if !ok || !bytes.Equal(v.mit.Key(), key) {
		return Message{}, false, v.mit.Error()
	}
	val, err := v.mit.ValueAndErr()
	if err != nil {
		return Message{}, false, err
	}
	v.mgp = gp
	v.decoded += int64(len(val))
	m, err = decodeMessage(gp, val)
	return m, err == nil, err
}

// StreamQuery selects messages of one stream.
type StreamQuery struct {
	Stream string
	// Position is the first stream position returned (negative means 0).
	Position int64
	// GlobalPosition, when positive, also drops messages below this
	// global position.
	GlobalPosition int64
	// Limit: 0 means DefaultLimit, negative means unlimited.
	Limit int
	// Backward reads from Position down (negative: from the stream's last
	// message), newest first; GlobalPosition still drops messages below it.
	Backward bool
}

// ReadStream returns the stream's messages in position order, or in
// reverse order with q.Backward.
func (v *View) ReadStream(q StreamQuery) ([]Message, error) {
	limit := normLimit(q.Limit)
	lower, upper := streamKey(q.Stream, max(q.Position, 0)), prefixEnd(streamPrefix(q.Stream))
	if q.Backward {
		lower = streamPrefix(q.Stream)
		if q.Position >= 0 {
			upper = streamKey(q.Stream, q.Position+1)
		}
	}
	it, err := v.iter(lower, upper)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	w := walk{it, q.Backward}
	p := v.startPage(limit)
	for ok := w.first(); ok && !p.full(); ok = w.next() {
		gp, err := decodeUint64(it.Value())
		if err != nil {
			return nil, err
		}
		if gp < q.GlobalPosition {
			p.skip(nextPosition(keySuffixUint64(it.Key()), q.Backward))
			continue
		}
		m, err := v.message(gp)
		if err != nil {
			return nil, err
		}
		p.add(m)
	}
	return v.done(&p, it.Error())
}

// CategoryQuery selects messages of one category in global order.
type CategoryQuery struct {
	// Category; "" means every message of the namespace (EventoDB's
	// category.get "" used by export).
	Category string
	// GlobalPosition is the first global position returned (below 1 means 1).
	GlobalPosition int64
	// Limit: 0 means DefaultLimit, negative means unlimited.
	Limit int
	// Correlation, when set, keeps only messages whose
	// metadata.correlationStreamName has the category of this value.
	Correlation string
	// Member and Size select a consumer group member; Size 0 means none.
	Member, Size int64
	// Backward reads from GlobalPosition down (negative: from the last
	// message; 0 reads nothing), newest first.
	Backward bool
	// Filter keeps messages of some types and stream-name prefix; the
	// prefix is checked on the index entry, the types on the message.
	Filter Filter
	// After is a state vector (statevector.go): a message of a stream it
	// names is returned only above the position it gives. nil: none.
	After map[string]int64
}

// ReadCategory returns the category's messages in global-position order
// (reversed with q.Backward). Filters combine; the page is filled with
// matching messages (it is short only when no more match, or when it
// stopped at the page byte cap).
func (v *View) ReadCategory(q CategoryQuery) ([]Message, error) {
	limit := normLimit(q.Limit)
	from := max(q.GlobalPosition, 1)
	if q.Backward {
		from = q.GlobalPosition // negative: from the end
	}
	var corr []byte
	if q.Correlation != "" {
		corr = []byte(Category(q.Correlation))
	}
	if q.Category == "" {
		var pre *Filter
		if !q.Filter.empty() {
			pre = &q.Filter
		}
		return v.readAll(from, limit, q.Backward, pre, func(m *Message) bool {
			if held(q.After, m) {
				return false
			}
			if q.Size > 0 && ConsumerGroupMember(m.Stream, q.Size) != q.Member {
				return false
			}
			return corr == nil || correlationCategory(m.Metadata) == string(corr)
		})
	}
	lower, upper := categoryKey(q.Category, from), prefixEnd(categoryPrefix(q.Category))
	if q.Backward {
		lower = categoryPrefix(q.Category)
		if from >= 0 {
			upper = categoryKey(q.Category, from+1)
		}
	}
	it, err := v.iter(lower, upper)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	w := walk{it, q.Backward}
	p := v.startPage(limit)
	for ok := w.first(); ok && !p.full(); ok = w.next() {
		gp := keySuffixUint64(it.Key())
		flags, hash, stream, corrCat, err := decodeCatEntry(it.Value())
		if err != nil {
			return nil, err
		}
		if !q.Filter.keepsStream(stream) ||
			q.Size > 0 && (flags&1 == 0 || groupMember(hash, q.Size) != q.Member) ||
			corr != nil && !bytes.Equal(corrCat, corr) {
			p.skip(nextPosition(gp, q.Backward))
			continue
		}
		m, err := v.message(gp)
		if err != nil {
			return nil, err
		}
		if len(q.Filter.Types) > 0 && !slices.Contains(q.Filter.Types, m.Type) || held(q.After, &m) {
			p.skip(nextPosition(gp, q.Backward))
			continue
		}
		p.add(m)
	}
	return v.done(&p, it.Error())
}

// ReadAll returns every message of the namespace from global position from
// (below 1 means 1) in global order.
func (v *View) ReadAll(from int64, limit int) ([]Message, error) {
	return v.readAll(max(from, 1), normLimit(limit), false, nil, nil)
}

// ReadAllBackward returns the namespace's messages from global position
// from down (negative: from the last message), newest first: with from -1
// and limit N, the last N messages.
func (v *View) ReadAllBackward(from int64, limit int) ([]Message, error) {
	return v.readAll(from, normLimit(limit), true, nil, nil)
}

// readAll reads M from global position from up, or backward from it down
// (negative: from the end), keeping what filter (nil: no filter) and then
// keep (nil: everything) accept. The filter looks at each message's stream
// and type in its stored bytes, so a message it refuses costs no decode.
func (v *View) readAll(from int64, limit int, backward bool, filter *Filter, keep func(*Message) bool) ([]Message, error) {
	lower, upper := messageKey(from), prefixEnd(prefixMessage)
	if backward {
		lower = prefixMessage
		if from >= 0 {
			upper = messageKey(from + 1)
		}
	}
	it, err := v.iter(lower, upper)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	w := walk{it, backward}
	p := v.startPage(limit)
	for ok := w.first(); ok && !p.full(); ok = w.next() {
		val, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		gp := keySuffixUint64(it.Key())
		if filter != nil {
			if stream, typ, ok := peekStreamType(val); ok && !filter.keepsRaw(stream, typ) {
				p.skip(nextPosition(gp, backward))
				continue
			}
		}
		v.decoded += int64(len(val))
		m, err := decodeMessage(gp, val)
		if err != nil {
			return nil, err
		}
		if (filter == nil || filter.keeps(&m)) && (keep == nil || keep(&m)) {
			p.add(m)
		} else {
			p.skip(nextPosition(m.GlobalPosition, backward))
		}
	}
	return v.done(&p, it.Error())
}

// LastMessage returns the stream's last message, or of the given type when
// typ is set. ok is false when there is none.
func (v *View) LastMessage(stream, typ string) (m Message, ok bool, err error) {
	var gp int64
	if typ == "" {
		meta, found, err := v.streamMeta(stream)
		if err != nil || !found || meta.count == 0 {
			// count 0: every message was deleted (the version stays).
			return Message{}, false, err
		}
		gp = meta.lastGP
		if meta.flags&streamTruncated != 0 {
			// The last message may be one of those removed (by type):
			// the last SI key is the last one left.
			if gp, found, err = v.lastIndexed(streamPrefix(stream)); err != nil || !found {
				return Message{}, false, err
			}
		}
	} else {
		var found bool
		if gp, found, err = v.lastIndexed(typePrefix(stream, typ)); err != nil || !found {
			return Message{}, false, err
		}
	}
	m, err = v.message(gp)
	return m, err == nil, err
}

// lastIndexed returns the global position held by the last SI or TI key
// with prefix p.
func (v *View) lastIndexed(p []byte) (gp int64, found bool, err error) {
	it, err := v.iter(p, prefixEnd(p))
	if err != nil {
		return 0, false, err
	}
	if found = it.Last(); found {
		gp, err = decodeUint64(it.Value())
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return gp, found, err
}

// StreamVersion returns the stream's last position, -1 when it has no
// message.
func (v *View) StreamVersion(stream string) (int64, error) {
	meta, found, err := v.streamMeta(stream)
	if err != nil || !found {
		return -1, err
	}
	return meta.lastPos, nil
}

// StreamHardDeleted reports whether the stream is a tombstone (hard-deleted:
// it refuses every later write); false for a stream that never had a
// message.
func (v *View) StreamHardDeleted(stream string) (bool, error) {
	meta, found, err := v.streamMeta(stream)
	if err != nil || !found {
		return false, err
	}
	return meta.flags&streamHardDeleted != 0, nil
}

func (v *View) streamMeta(stream string) (streamMeta, bool, error) {
	val, err := get(v.snap, versionKey(stream))
	if err != nil || val == nil {
		return streamMeta{}, false, err
	}
	meta, err := decodeStreamMeta(val)
	return meta, err == nil, err
}

// StreamInfo describes one stream in a listing.
type StreamInfo struct {
	Stream       string
	Version      int64
	LastActivity int64 // unix ns of its last write
}

// StreamsQuery pages through stream names in byte order.
type StreamsQuery struct {
	Prefix string
	Cursor string // return names strictly greater than this
	Limit  int    // 0 means DefaultStreamsPage
}

// ListStreams returns up to Limit streams with at least one message, and
// the cursor for the next page ("" when nothing follows). Deleted streams
// keep their version for writers and are passed over, each spending one
// entry of the view's scan budget (SetScanBudget): once it is spent, the
// page ends early (perhaps empty) with the cursor of the last stream
// examined, so a namespace of many deleted streams costs a caller one
// bounded step per call. The read checks the view's context as it goes.
func (v *View) ListStreams(q StreamsQuery) (streams []StreamInfo, next string, err error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultStreamsPage
	}
	lower := versionKey(q.Prefix)
	if q.Cursor != "" {
		if after := append(versionKey(q.Cursor), 0); bytes.Compare(after, lower) > 0 {
			lower = after
		}
	}
	it, err := v.iter(lower, prefixEnd(versionKey(q.Prefix)))
	if err != nil {
		return nil, "", err
	}
	defer it.Close()
	streams = []StreamInfo{}
	examined, skipped := 0, 0
	for ok := it.First(); ok; ok = it.Next() {
		if len(streams) == limit {
			return streams, streams[limit-1].Stream, it.Error()
		}
		if examined++; examined%checkEvery == 1 && v.ctx != nil {
			if err := v.ctx.Err(); err != nil {
				return nil, "", fmt.Errorf("fsm: stream listing stopped after passing %d deleted streams: %w", skipped, err)
			}
		}
		meta, err := decodeStreamMeta(it.Value())
		if err != nil {
			return nil, "", err
		}
		if meta.count == 0 {
			// Deleted: its messages are gone, its version stays for writers.
			if skipped++; v.scanBudget > 0 && skipped >= v.scanBudget {
				return streams, string(it.Key()[len(prefixVersion):]), it.Error()
			}
			continue
		}
		streams = append(streams, StreamInfo{
			Stream:       string(it.Key()[len(prefixVersion):]),
			Version:      meta.lastPos,
			LastActivity: meta.lastTime,
		})
	}
	return streams, "", it.Error()
}

// CategoryInfo describes one category in a listing.
type CategoryInfo struct {
	Category     string
	StreamCount  int64
	MessageCount int64
}

// CategoriesQuery pages through categories in byte order.
type CategoriesQuery struct {
	Cursor string // return categories strictly greater than this
	Limit  int    // 0 or more than MaxCategoriesPage means MaxCategoriesPage
}

// ListCategories returns up to Limit categories in byte order with their
// counts, and the cursor for the next page ("" when nothing follows).
func (v *View) ListCategories(q CategoriesQuery) (out []CategoryInfo, next string, err error) {
	limit := q.Limit
	if limit <= 0 || limit > MaxCategoriesPage {
		limit = MaxCategoriesPage
	}
	lower := prefixCatCount
	if q.Cursor != "" {
		lower = append(append(bytes.Clone(prefixCatCount), q.Cursor...), 0)
	}
	it, err := v.iter(lower, prefixEnd(prefixCatCount))
	if err != nil {
		return nil, "", err
	}
	defer it.Close()
	out = []CategoryInfo{}
	for ok := it.First(); ok; ok = it.Next() {
		if len(out) == limit {
			return out, out[limit-1].Category, it.Error()
		}
		c, err := decodeCatCounts(it.Value())
		if err != nil {
			return nil, "", err
		}
		out = append(out, CategoryInfo{
			Category:     string(it.Key()[len(prefixCatCount):]),
			StreamCount:  c.streams,
			MessageCount: c.messages,
		})
	}
	return out, "", it.Error()
}

// NamespaceStats are a namespace's counters.
type NamespaceStats struct {
	MessageCount int64
	StreamCount  int64
	LastActivity int64 // unix ns of the last write, 0 when none
}

// Stats returns the namespace's counters, kept by apply in the same batches
// as the messages (no scan).
func (v *View) Stats() (NamespaceStats, error) {
	val, err := get(v.snap, keyNSCounts)
	if err != nil || val == nil {
		return NamespaceStats{}, err
	}
	c, err := decodeNSCounts(val)
	if err != nil {
		return NamespaceStats{}, err
	}
	return NamespaceStats{MessageCount: c.messages, StreamCount: c.streams, LastActivity: c.lastActivity}, nil
}

// NextGlobalPosition returns the global position the next append will get
// (1 in an empty namespace): every stored message is below it.
func (v *View) NextGlobalPosition() (int64, error) {
	val, err := get(v.snap, keyNextGP)
	if err != nil || val == nil {
		return 1, err
	}
	return decodeUint64(val)
}
