package fsm

import (
	"bytes"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Reads of user-defined indexes: definitions, progress, and queries over
// the entries (XE id fields gp). A query names values for the first
// fields (equality), then at most one range or prefix on the next field,
// and walks the entries between the bounds these give, forward or
// backward, reading each entry's message from the same snapshot. An
// entry whose message is gone (removed after the loop indexed it; the
// loop has not applied the removal yet) is skipped.

// Limits of index queries.
const (
	// DefaultIndexLimit is a query's page when it names none.
	DefaultIndexLimit = 100
	// MaxIndexLimit is the largest page a query may ask for.
	MaxIndexLimit = 1000
)

// IndexBound is one end of a range on a field.
type IndexBound struct {
	Value     string // parsed by the field's type (ParseIndexValue)
	Exclusive bool
}

// IndexQuery selects entries of one index.
type IndexQuery struct {
	Index string
	// Equal holds values of the first len(Equal) fields.
	Equal []string
	// On the field after them, at most one of a range (From and/or To)
	// and a prefix (string fields).
	From, To *IndexBound
	Prefix   *string
	Backward bool
	// Limit: 0 means DefaultIndexLimit.
	Limit int
	// Cursor is a page's NextCursor: the query continues after it. It
	// is at most MaxIndexCursorBytes (indexcursor.go).
	Cursor []byte
	// PositionsOnly returns global positions and values, not messages.
	PositionsOnly bool
}

// IndexHit is one entry a query returns.
type IndexHit struct {
	GlobalPosition int64
	Values         []any // the entry's field values, in field order
	// Stream is the entry's stream in a stream index (its document; set
	// with PositionsOnly too), "" in an event index.
	Stream  string
	Message *Message
}

// hitOverhead is what hit.size adds for a hit's position, its framing
// and that of its message, rounded up.
const hitOverhead = 32

// valueOverhead bounds a value's text and framing in a reply beyond a
// string's bytes: the longest number, or a time in RFC 3339 with
// nanoseconds.
const valueOverhead = 40

// size is the bytes of h without its message as a page counts them: it
// bounds the hit's encoding in a reply from above.
func (h *IndexHit) size() int {
	n := hitOverhead + len(h.Stream)
	for _, v := range h.Values {
		n += valueOverhead
		if s, ok := v.(string); ok {
			n += len(s)
		}
	}
	return n
}

// IndexPage is a query's answer.
type IndexPage struct {
	Hits []IndexHit
	// NextCursor continues the query; nil when it reached its end.
	NextCursor []byte
	// Examined is the entries read; Capped: the page stopped at the
	// page byte cap or the view's scan budget before its limit (then
	// NextCursor is set, perhaps on an empty page).
	Examined int
	Capped   bool
}

// IndexInfo is an index's definition and this node's progress.
type IndexInfo struct {
	Definition *fsmv1.IndexDefinition
	// Checkpoint is the last global position the loop read, or passed at
	// the end of the namespace where the last messages were deleted;
	// Entries and Skipped its counts (node-local).
	Checkpoint, Entries, Skipped int64
	// LagEvents is the namespace's last global position less Checkpoint.
	LagEvents int64
	// Covered is the applied index every message of which the index holds
	// on this node (0: not known yet); each index has its own, so one that
	// builds holds back no sibling.
	Covered uint64
	// Built: a round reached the end of the namespace since the index was
	// created (or an import cleared it); until then it is building, and
	// Progress is Checkpoint over the namespace's last global position,
	// ETA the time the rest takes at the loop's recent rate (0: unknown).
	Built    bool
	Progress float64
	ETA      time.Duration
	// LagTime is the age of the oldest message the index does not hold
	// yet (0 when it holds every one).
	LagTime time.Duration
	// Paused: SetIndexState paused the index (and its rebuild) on every
	// node; it keeps its checkpoint and answers queries.
	Paused bool
	// MemoryBytes: a memory index's namespace memory store size on this
	// node (0 for an index on disk).
	MemoryBytes int64
	// Failure: this node stopped maintaining the index after an error
	// confined to it (indexstate.go); "" when it did not.
	Failure string
	// Rebuilding is the progress of a rebuild of this index while it
	// builds on this node (nil otherwise): Definition is then the one
	// queries still answer from.
	Rebuilding *IndexInfo
}

// Indexes lists the namespace's indexes by name.
func (v *View) Indexes() ([]IndexInfo, error) {
	defs, err := loadIndexes(v.snap)
	if err != nil {
		return nil, err
	}
	out := make([]IndexInfo, 0, len(defs))
	for _, d := range sortedIndexes(defs) {
		info, err := v.infoOf(d)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// infoOf is the info of the definition this node answers d's name from,
// with the rebuild still building beside it.
func (v *View) infoOf(d *fsmv1.IndexDefinition) (IndexInfo, error) {
	answer, building, err := effectiveIndex(indexReader{v}, d)
	if err != nil {
		return IndexInfo{}, err
	}
	info, err := v.indexInfo(answer)
	info.Paused = d.Paused
	if err != nil || building == nil {
		return info, err
	}
	next, err := v.indexInfo(building)
	next.Paused = d.Paused
	info.Rebuilding = &next
	return info, err
}

// IndexCovered returns the applied index up to which index name (as this
// view's snapshot defines it) holds every message, as loaded before the
// snapshot: a read that waited for the index checks it here, in case the
// name was deleted and created again meanwhile (0: unknown, or no such
// index).
func (v *View) IndexCovered(name string) uint64 {
	d, err := v.indexDef(name)
	if err != nil {
		return 0
	}
	return v.coveredBy[d.Id]
}

// Index returns one index's definition and progress; ErrIndexNotFound
// when the namespace has none of that name.
func (v *View) Index(name string) (IndexInfo, error) {
	d, err := v.storedIndexDef(name)
	if err != nil {
		return IndexInfo{}, err
	}
	return v.infoOf(d)
}

// indexDef is the definition this node answers queries of name from
// (the stored one, or its rebuild once this node built it).
func (v *View) indexDef(name string) (*fsmv1.IndexDefinition, error) {
	d, err := v.storedIndexDef(name)
	if err != nil {
		return nil, err
	}
	answer, _, err := effectiveIndex(indexReader{v}, d)
	return answer, err
}

// storedIndexDef is XD name as stored (with its pending rebuild).
func (v *View) storedIndexDef(name string) (*fsmv1.IndexDefinition, error) {
	val, err := get(v.snap, indexDefKey(name))
	if err != nil {
		return nil, err
	}
	if val == nil {
		return nil, fmt.Errorf("%w: %q", ErrIndexNotFound, name)
	}
	d := &fsmv1.IndexDefinition{}
	if err := proto.Unmarshal(val, d); err != nil {
		return nil, fmt.Errorf("fsm: index %q: %w", name, err)
	}
	return d, nil
}

func (v *View) indexInfo(d *fsmv1.IndexDefinition) (IndexInfo, error) {
	info := IndexInfo{Definition: d, Covered: v.coveredBy[d.Id]}
	var err error
	if info.Failure, err = v.indexFailureOf(d.Id); err != nil {
		return info, err
	}
	info.MemoryBytes = v.memoryBytes(d)
	val, err := get(indexReader{v}, indexCkptKey(d.Id))
	if err != nil {
		return info, err
	}
	if val != nil {
		c, err := decodeIndexCkpt(val)
		if err != nil && info.Failure == "" {
			return info, err
		}
		info.Checkpoint, info.Entries, info.Skipped, info.Built = c.gp, c.entries, c.skipped, c.built
	}
	next, err := v.NextGlobalPosition()
	if err != nil {
		return info, err
	}
	info.LagEvents = max(next-1-info.Checkpoint, 0)
	info.Progress = 1
	if !info.Built && next > 1 {
		info.Progress = float64(min(info.Checkpoint, next-1)) / float64(next-1)
		if rate := math.Float64frombits(v.ns.indexer.rate.Load()); rate > 0 {
			info.ETA = time.Duration(float64(info.LagEvents) / rate * float64(time.Second))
		}
	}
	if info.LagEvents > 0 {
		// The first message past the checkpoint (gaps are skipped).
		it, err := v.iter(messageKey(info.Checkpoint+1), prefixEnd(prefixMessage))
		if err != nil {
			return info, err
		}
		if it.First() {
			if val, err := it.ValueAndErr(); err == nil {
				if m, err := decodeMessage(keySuffixUint64(it.Key()), val); err == nil && m.Time > 0 {
					info.LagTime = max(time.Since(time.Unix(0, m.Time)), 0)
				}
			}
		}
		if err := it.Close(); err != nil {
			return info, err
		}
	}
	return info, nil
}

// QueryIndex runs q (see IndexQuery). Bad values, a prefix on a field
// that is not a string, more values than fields, or a cursor that is not
// this query's are ValidationErrors.
//
// Bounded like the other reads of a view: the page byte cap
// (SetPageBytes) by the rule of every page (at least one hit; a page
// stops before the hit that would take it past the cap), each hit
// counting its values, stream and message (none with PositionsOnly), and
// MaxIndexCursorBytes of the cap kept for the cursor; and the scan budget (SetScanBudget) for the entries it
// reads and does not return (those of removed messages the loop has not
// dropped yet). A query that spends its budget returns the hits it has
// (perhaps none) with Capped and NextCursor set after the last entry it
// read, never an error; PageCapped and ScanStopped report it (resume is
// 0: the cursor is the query's start field). It also checks the view's
// context as it goes.
func (v *View) QueryIndex(q IndexQuery) (IndexPage, error) {
	var page IndexPage
	d, err := v.indexDef(q.Index)
	if err != nil {
		return page, err
	}
	if err := v.usableIndex(d); err != nil { // indexstate.go
		return page, err
	}
	lower, upper, err := indexBounds(d, &q)
	if err != nil {
		return page, err
	}
	if len(q.Cursor) > 0 {
		after, err := v.cursorKey(d, q.Cursor)
		if err != nil {
			return page, err
		}
		if bytes.Compare(after, lower) < 0 || bytes.Compare(after, upper) >= 0 {
			return page, invalid("cursor", "does not belong to this query (give the same index, values and bounds as the page it came from)")
		}
		if q.Backward {
			upper = after
		} else {
			lower = append(bytes.Clone(after), 0)
		}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultIndexLimit
	}
	it, err := v.iter(lower, upper)
	if err != nil {
		return page, err
	}
	defer it.Close()
	w := walk{it: it, backward: q.Backward}
	pg := v.startPage(limit)
	if pg.maxBytes > 0 {
		// The hits share the page with the cursor that follows them.
		pg.maxBytes = max(pg.maxBytes-MaxIndexCursorBytes, 1)
	}
	prefix := indexEntryPrefix(d.Id)
	for ok := w.first(); ok; ok = w.next() {
		k := it.Key()
		page.Examined++
		gp := keySuffixUint64(k)
		vals, err := decodeOrderKeys(d.Fields, k[len(prefix):len(k)-8])
		if err != nil {
			return page, fmt.Errorf("fsm: index %q entry %x: %w", d.Name, k, err)
		}
		var (
			m     Message
			found bool
		)
		if q.PositionsOnly {
			found, err = v.messageExists(gp)
		} else {
			m, found, err = v.lookupMessage(gp)
		}
		if err != nil {
			return page, err
		}
		if !found {
			// Removed; the loop has not dropped the entry yet. It spends
			// the scan budget: once spent, the page ends here, and the
			// query goes on after this entry (it was read).
			if pg.skip(0); pg.stopped {
				page.Capped, page.NextCursor = true, cursorOf(k, gp)
				break
			}
			if pg.err != nil {
				break
			}
			continue
		}
		hit := IndexHit{GlobalPosition: gp, Values: vals}
		if isStreamIndex(d) {
			hit.Stream = string(it.Value())
		}
		pg.look()
		size := hit.size()
		if !q.PositionsOnly {
			size += m.Size()
		}
		if !pg.room(size) {
			page.Capped = true
			break
		}
		if !q.PositionsOnly {
			pg.msgs = append(pg.msgs, m)
		}
		if pg.err != nil {
			break
		}
		page.Hits = append(page.Hits, hit)
		page.NextCursor = cursorOf(k, gp)
		if len(page.Hits) >= limit {
			if !w.next() {
				page.NextCursor = nil // nothing follows
			}
			break
		}
	}
	if err := it.Error(); err != nil {
		return page, err
	}
	if pg.err != nil {
		return page, fmt.Errorf("fsm: index %q: query: %w", d.Name, pg.err)
	}
	if !page.Capped && len(page.Hits) < limit {
		page.NextCursor = nil // the walk reached its end
	}
	if !q.PositionsOnly {
		for i := range page.Hits {
			page.Hits[i].Message = &pg.msgs[i]
		}
	}
	v.capped, v.stopped, v.lastBytes = pg.capped, pg.stopped, pg.bytes
	return page, nil
}

// messageExists reports whether the message at gp is stored, without
// decoding it.
func (v *View) messageExists(gp int64) (bool, error) {
	if v.mit == nil {
		it, err := v.iter(prefixMessage, prefixEnd(prefixMessage))
		if err != nil {
			return false, err
		}
		v.mit = it
	}
	v.mgp = 0 // lookupMessage must seek next time
	key := messageKey(gp)
	if !v.mit.SeekGE(key) || !bytes.Equal(v.mit.Key(), key) {
		return false, v.mit.Error()
	}
	return true, nil
}

// checkIndexValueSize refuses a string value no entry can hold: one
// longer than MaxIndexValueBytes (such values are not indexed). A range's
// ends are not checked: a long bound still orders shorter values.
func checkIndexValueSize(field string, t fsmv1.IndexFieldType, text string) error {
	if t == fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING && len(text) > MaxIndexValueBytes {
		return invalid(field, "is %d bytes; string values longer than %d bytes are not indexed, so none matches",
			len(text), MaxIndexValueBytes)
	}
	return nil
}

// indexBounds turns q's values into the key range [lower, upper) of d's
// entries.
func indexBounds(d *fsmv1.IndexDefinition, q *IndexQuery) (lower, upper []byte, err error) {
	base := indexEntryPrefix(d.Id)
	if len(q.Equal) > len(d.Fields) {
		return nil, nil, invalid("equal", "has %d values; the index has %d fields", len(q.Equal), len(d.Fields))
	}
	for i, text := range q.Equal {
		if err := checkIndexValueSize(fmt.Sprintf("equal[%d]", i), d.Fields[i].Type, text); err != nil {
			return nil, nil, err
		}
		val, err := ParseIndexValue(fmt.Sprintf("equal[%d]", i), d.Fields[i].Type, text)
		if err != nil {
			return nil, nil, err
		}
		base = appendOrderKey(base, d.Fields[i].Type, val)
	}
	ranged := q.From != nil || q.To != nil
	if !ranged && q.Prefix == nil {
		return base, prefixEnd(base), nil
	}
	if ranged && q.Prefix != nil {
		return nil, nil, invalid("prefix", "cannot be combined with a range")
	}
	if len(q.Equal) == len(d.Fields) {
		return nil, nil, invalid("equal", "gives every field a value; a range or prefix needs a field after them")
	}
	f := d.Fields[len(q.Equal)]
	if q.Prefix != nil {
		if f.Type != fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING {
			return nil, nil, invalid("prefix", "is for string fields; field %d is %s", len(q.Equal), typeName(f.Type))
		}
		if err := checkIndexValueSize("prefix", f.Type, *q.Prefix); err != nil {
			return nil, nil, err
		}
		p := appendEscaped(bytes.Clone(base), *q.Prefix)
		return p, prefixEnd(p), nil
	}
	lower, upper = base, prefixEnd(base)
	if q.From != nil {
		val, err := ParseIndexValue("from", f.Type, q.From.Value)
		if err != nil {
			return nil, nil, err
		}
		lower = appendOrderKey(bytes.Clone(base), f.Type, val)
		if q.From.Exclusive {
			lower = prefixEnd(lower)
		}
	}
	if q.To != nil {
		val, err := ParseIndexValue("to", f.Type, q.To.Value)
		if err != nil {
			return nil, nil, err
		}
		upper = appendOrderKey(bytes.Clone(base), f.Type, val)
		if !q.To.Exclusive {
			upper = prefixEnd(upper)
		}
	}
	if bytes.Compare(lower, upper) > 0 {
		upper = lower // an empty range
	}
	return lower, upper, nil
}

func typeName(t fsmv1.IndexFieldType) string {
	if s, ok := fsmv1.IndexFieldType_name[int32(t)]; ok && t != 0 {
		return bytesToLower(s[len("INDEX_FIELD_TYPE_"):])
	}
	return "unknown"
}

func bytesToLower(s string) string { return string(bytes.ToLower([]byte(s))) }
