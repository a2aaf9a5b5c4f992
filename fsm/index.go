package fsm

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// User-defined indexes (DESIGN.md, User-defined indexes). A definition is
// replicated: CreateIndex and DeleteIndex are log entries, applied here
// into the namespace's database (XD name -> IndexDefinition) and into an
// in-memory copy on the namespace handle (loaded with the database,
// changed in place by apply, as retention policies are). The entries are
// not written by apply: each node's index loop (indexer.go) derives them
// from its own messages, so appends cost nothing more.
//
// What apply does for indexes besides definitions is the change log
// (XL): while a namespace has an index, every entry that takes messages
// away or puts them below the loop's reach stages a record in the same
// batch as its own effects, keyed by (entry index, first global
// position), so records sort in log order:
//
//	R hi   messages lo..hi were removed (stream delete, truncate,
//	       watermark deletion, retention)
//	A hi   an import wrote messages lo..hi below the namespace's next
//	       global position (a gap the loop may have passed)
//	C      an import cleared the namespace (lo = 0)
//	D id   the index of that id was deleted (lo = 0)
//
// The loop applies the records and deletes them; appends need none (the
// loop reads the messages above its checkpoint).

// Limits of index definitions.
const (
	// MaxIndexes bounds the indexes of one namespace.
	MaxIndexes = 64
	// MaxIndexFields bounds the fields of one index.
	MaxIndexFields = 8
	// MaxIndexPointerBytes bounds a field's JSON pointer.
	MaxIndexPointerBytes = 512
)

// Change log record kinds (XL values start with one).
const (
	changeRemoved byte = 'R'
	changeAdded   byte = 'A'
	changeCleared byte = 'C'
	changeDropped byte = 'D'
)

func indexDefKey(name string) []byte {
	return append(append(make([]byte, 0, len(prefixIndexDef)+len(name)), prefixIndexDef...), name...)
}

func indexChangeKey(index uint64, lo int64) []byte {
	return appendUint64(appendUint64(append(make([]byte, 0, 18), prefixIndexChange...), index), uint64(lo))
}

// indexEntryPrefix is XE id: the common prefix of one index's entries.
func indexEntryPrefix(id uint64) []byte {
	return appendUint64(append(make([]byte, 0, 64), prefixIndexEntry...), id)
}

func indexReverseKey(id uint64, gp int64) []byte {
	return appendUint64(appendUint64(append(make([]byte, 0, 18), prefixIndexReverse...), id), uint64(gp))
}

func indexCkptKey(id uint64) []byte {
	return appendUint64(append(make([]byte, 0, 10), prefixIndexCkpt...), id)
}

func indexedHintKey(namespace string) []byte {
	return append(append(make([]byte, 0, len(prefixIndexed)+len(namespace)), prefixIndexed...), namespace...)
}

// ValidateIndexDefinition checks a definition as a client gives it (id and
// created time are apply's): a name like a namespace's, the event or
// stream kind, a source of at least one of category (no '-'), types and
// a query, and 1..MaxIndexFields fields, each a source and a type that
// fit together.
func ValidateIndexDefinition(d *fsmv1.IndexDefinition) error {
	if d == nil {
		return invalid("definition", "is required")
	}
	if err := ValidateGroupName("name", d.Name); err != nil {
		return err
	}
	switch d.Kind {
	case fsmv1.IndexKind_INDEX_KIND_UNSPECIFIED, fsmv1.IndexKind_INDEX_KIND_EVENT, fsmv1.IndexKind_INDEX_KIND_STREAM:
	default:
		return invalid("kind", "unknown kind %d", d.Kind)
	}
	switch d.Storage {
	case fsmv1.IndexStorage_INDEX_STORAGE_UNSPECIFIED, fsmv1.IndexStorage_INDEX_STORAGE_PEBBLE, fsmv1.IndexStorage_INDEX_STORAGE_MEMORY:
	default:
		return invalid("storage", "must be pebble or memory, got %d", d.Storage)
	}
	if d.Category == "" && len(d.Types) == 0 && d.Query == nil {
		return invalid("source", "must name a category, event types or a query (or several of them)")
	}
	if d.Category != "" {
		if strings.Contains(d.Category, "-") {
			return invalid("category", "must not contain '-': %q names a stream, not a category", d.Category)
		}
		if err := ValidateStreamName("category", d.Category); err != nil {
			return err
		}
	}
	if len(d.Types) > MaxQueryItemTypes {
		return invalid("types", "must hold at most %d types, got %d", MaxQueryItemTypes, len(d.Types))
	}
	for i, t := range d.Types {
		if err := ValidateTypeName(fmt.Sprintf("types[%d]", i), t); err != nil {
			return err
		}
	}
	if d.Query != nil {
		if err := ValidateQuery("query", QueryOf(d.Query)); err != nil {
			return err
		}
	}
	if n := len(d.Fields); n < 1 || n > MaxIndexFields {
		return invalid("fields", "must hold 1..%d fields, got %d", MaxIndexFields, n)
	}
	for i, f := range d.Fields {
		if err := validateIndexField(fmt.Sprintf("fields[%d]", i), f); err != nil {
			return err
		}
	}
	return nil
}

func validateIndexField(path string, f *fsmv1.IndexField) error {
	if f == nil {
		return invalid(path, "is empty")
	}
	if _, ok := fsmv1.IndexFieldType_name[int32(f.Type)]; !ok || f.Type == fsmv1.IndexFieldType_INDEX_FIELD_TYPE_UNSPECIFIED {
		return invalid(path+".type", "must be string, int, float, time or bool")
	}
	switch f.Source {
	case fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_METADATA:
		switch {
		case f.Pointer == "" || f.Pointer[0] != '/':
			return invalid(path+".pointer", "must be a JSON pointer starting with '/', got %q", f.Pointer)
		case len(f.Pointer) > MaxIndexPointerBytes:
			return invalid(path+".pointer", "must be at most %d bytes, got %d", MaxIndexPointerBytes, len(f.Pointer))
		}
		for i := 0; i < len(f.Pointer); i++ {
			if f.Pointer[i] == '~' && (i+1 >= len(f.Pointer) || (f.Pointer[i+1] != '0' && f.Pointer[i+1] != '1')) {
				return invalid(path+".pointer", "has a '~' not followed by 0 or 1 (RFC 6901): %q", f.Pointer)
			}
		}
		return nil
	case fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_TYPE, fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_STREAM:
		if f.Type != fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING {
			return invalid(path+".type", "must be string for the message's %s", sourceName(f.Source))
		}
	case fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_TIME:
		if f.Type != fsmv1.IndexFieldType_INDEX_FIELD_TYPE_TIME {
			return invalid(path+".type", "must be time for the message's time")
		}
	default:
		return invalid(path+".source", "must be data, metadata, type, stream or time")
	}
	if f.Pointer != "" {
		return invalid(path+".pointer", "is only for the data and metadata sources")
	}
	return nil
}

func sourceName(s fsmv1.IndexFieldSource) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "INDEX_FIELD_SOURCE_"))
}

// matches reports whether m belongs in the index of d: every one of its
// category, types and query that is given matches.
func indexMatches(d *fsmv1.IndexDefinition, m *Message) bool {
	if d.Category != "" && Category(m.Stream) != d.Category {
		return false
	}
	if len(d.Types) > 0 && !containsString(d.Types, m.Type) {
		return false
	}
	if d.Query != nil {
		return queryMatches(QueryOf(d.Query), m.Type, m.Tags)
	}
	return true
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// queryMatches reports whether a message of type typ with tags matches q:
// an item matches when the type is one of its types (or it has none) and
// every one of its tags is among the message's.
func queryMatches(q Query, typ string, tags []string) bool {
	for _, it := range q.Items {
		if len(it.Types) > 0 && !containsString(it.Types, typ) {
			continue
		}
		ok := true
		for _, t := range it.Tags {
			if !containsString(tags, t) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// loadIndexes reads a namespace's definitions (nil when it has none).
func loadIndexes(r iterReader) (map[string]*fsmv1.IndexDefinition, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefixIndexDef, UpperBound: prefixEnd(prefixIndexDef)})
	if err != nil {
		return nil, err
	}
	var out map[string]*fsmv1.IndexDefinition
	for ok := it.First(); ok; ok = it.Next() {
		d := &fsmv1.IndexDefinition{}
		v, err := it.ValueAndErr()
		if err == nil {
			err = proto.Unmarshal(v, d)
		}
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("index %q: %w", it.Key()[len(prefixIndexDef):], err)
		}
		if out == nil {
			out = make(map[string]*fsmv1.IndexDefinition)
		}
		out[d.Name] = d
	}
	return out, it.Close()
}

// sortedIndexes returns definitions by name.
func sortedIndexes(m map[string]*fsmv1.IndexDefinition) []*fsmv1.IndexDefinition {
	out := make([]*fsmv1.IndexDefinition, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (a *applier) createIndex(l *Entry, c *fsmv1.CreateIndex) any {
	if err := ValidateIndexDefinition(c.Definition); err != nil {
		return err
	}
	ns := a.lookup(c.Namespace)
	// The hint follows in _metadata under its own skip rule (target opens
	// the database, so the definitions are loaded even when the
	// namespace's part is skipped).
	defer func() {
		if ns != nil && len(ns.indexes) > 0 {
			a.indexedHint(c.Namespace, l)
		}
	}()
	nb, skipped, done := a.target(l, c.Namespace)
	if done {
		return skipped
	}
	if err := checkNewIndex(c.Namespace, ns.indexes, c.Definition.Name); err != nil {
		return err
	}
	d := proto.Clone(c.Definition).(*fsmv1.IndexDefinition)
	if d.Kind == fsmv1.IndexKind_INDEX_KIND_UNSPECIFIED {
		d.Kind = fsmv1.IndexKind_INDEX_KIND_EVENT
	}
	d.Id, d.CreatedUnixNano, d.Paused = l.Index, c.TimeUnixNano, false // paused: SetIndexState's
	a.putIndex(nb, d)
	nb.dirty = true
	nb.done(l)
	return &fsmv1.IndexResult{Namespace: c.Namespace, Definition: d}
}

// putIndex stages d as its namespace's stored definition and makes it
// the namespace's loaded one, in place: an abandoned call marks the
// namespace stale, so it is loaded again.
func (a *applier) putIndex(nb *nsBatch, d *fsmv1.IndexDefinition) {
	v, err := proto.MarshalOptions{Deterministic: true}.Marshal(d)
	if err != nil {
		a.fatal("encode index %q: %v", d.Name, err)
	}
	if err := nb.b.Set(indexDefKey(d.Name), v, nil); err != nil {
		a.fatal("stage index %q: %v", d.Name, err)
	}
	if nb.ns.indexes == nil {
		nb.ns.indexes = make(map[string]*fsmv1.IndexDefinition)
	}
	nb.ns.indexes[d.Name] = d
}

// existingIndex is target for an entry on the index name, which must
// exist: d is its loaded definition. When nb is nil, answer is the
// entry's answer instead (skipped, or ErrIndexNotFound).
func (a *applier) existingIndex(l *Entry, namespace, name string) (nb *nsBatch, d *fsmv1.IndexDefinition, answer any) {
	nb, skipped, done := a.target(l, namespace)
	if done {
		return nil, nil, skipped
	}
	d, ok := nb.ns.indexes[name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrIndexNotFound, name)
	}
	return nb, d, nil
}

func (a *applier) deleteIndex(l *Entry, c *fsmv1.DeleteIndex) any {
	if err := ValidateGroupName("name", c.Name); err != nil {
		return err
	}
	nb, d, answer := a.existingIndex(l, c.Namespace, c.Name)
	if nb == nil {
		return answer
	}
	a.deleteKeys(nb, indexDefKey(c.Name))
	// The loop drops the entries (it is their only writer), of a pending
	// rebuild too (keyed apart: lo is each record's own).
	a.logChange(nb, changeDropped, 0, int64(d.Id))
	if d.Next != nil {
		a.logChange(nb, changeDropped, 1, int64(d.Next.Id))
	}
	delete(nb.ns.indexes, c.Name)
	nb.dirty = true
	nb.done(l)
	return &fsmv1.IndexResult{Namespace: c.Namespace, Definition: d}
}

// indexedHint records in _metadata that namespace has indexes, so the
// node starts its loop at the next start without opening every database.
// A hint only: the loop of a namespace without indexes ends at once.
func (a *applier) indexedHint(namespace string, l *Entry) {
	if !a.touchMeta(l) {
		return
	}
	if err := a.meta.Set(indexedHintKey(namespace), nil, nil); err != nil {
		a.fatal("stage index hint: %v", err)
	}
}

// logChange stages a change record for the current entry when the
// namespace has an index (see the top of this file). kind R and A take
// the run lo..hi; C takes nothing; D takes the dropped index's id as hi.
func (a *applier) logChange(nb *nsBatch, kind byte, lo, hi int64) {
	if len(nb.ns.indexes) == 0 {
		return
	}
	v := appendUint64(append(make([]byte, 0, 9), kind), uint64(hi))
	if err := nb.b.Set(indexChangeKey(a.cur, lo), v, nil); err != nil {
		a.fatal("stage index change: %v", err)
	}
}

// IndexedNamespaces lists the namespaces _metadata names as having (or
// having had) indexes: where the node starts index loops.
func (s *Store) IndexedNamespaces() []string {
	it, err := s.meta.NewIter(&pebble.IterOptions{LowerBound: prefixIndexed, UpperBound: prefixEnd(prefixIndexed)})
	if err != nil {
		return nil
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		name := string(it.Key()[len(prefixIndexed):])
		if _, exists := s.Namespace(name); exists {
			out = append(out, name)
		}
	}
	return out
}
