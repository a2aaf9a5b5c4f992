package fsm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Sorting encoded order keys sorts the values, for every field type, and
// each encoding decodes back to its value.
func TestOrderKeySorts(t *testing.T) {
	tm := func(s string) int64 {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixNano()
	}
	for _, tc := range []struct {
		name   string
		typ    fsmv1.IndexFieldType
		sorted []any // ascending
	}{
		{"string", fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING, []any{"", "\x00", "\x00\x00", "\x00a", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "é", "\xff"}},
		{"int", fsmv1.IndexFieldType_INDEX_FIELD_TYPE_INT, []any{int64(math.MinInt64), int64(-1 << 40), int64(-2), int64(-1), int64(0), int64(1), int64(255), int64(256), int64(1 << 40), int64(math.MaxInt64)}},
		{"float", fsmv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT, []any{-math.MaxFloat64, -1e10, -2.5, -1.0, -math.SmallestNonzeroFloat64, 0.0, math.SmallestNonzeroFloat64, 0.5, 1.0, 2.5, 1e10, math.MaxFloat64}},
		{"time", fsmv1.IndexFieldType_INDEX_FIELD_TYPE_TIME, []any{tm("1677-09-22T00:00:00Z"), tm("1960-01-01T00:00:00Z"), tm("1969-12-31T23:59:59.999999999Z"), int64(0), tm("1970-01-01T00:00:00.000000001Z"), tm("2026-11-25T00:00:00Z"), tm("2262-04-10T00:00:00Z")}},
		{"bool", fsmv1.IndexFieldType_INDEX_FIELD_TYPE_BOOL, []any{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			perm := rand.New(rand.NewSource(1)).Perm(len(tc.sorted))
			type enc struct {
				key []byte
				i   int
			}
			var keys []enc
			for _, i := range perm {
				keys = append(keys, enc{appendOrderKey(nil, tc.typ, tc.sorted[i]), i})
			}
			sort.Slice(keys, func(a, b int) bool { return bytes.Compare(keys[a].key, keys[b].key) < 0 })
			for j, k := range keys {
				if k.i != j {
					t.Fatalf("position %d holds value %v, want %v", j, tc.sorted[k.i], tc.sorted[j])
				}
				vals, err := decodeOrderKeys([]*fsmv1.IndexField{{Type: tc.typ}}, k.key)
				if err != nil || !reflect.DeepEqual(vals[0], tc.sorted[j]) {
					t.Fatalf("decode %x = %v, %v; want %v", k.key, vals, err, tc.sorted[j])
				}
			}
		})
	}
	// -0 orders as 0.
	if !bytes.Equal(appendOrderKey(nil, fsmv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT, math.Copysign(0, -1)), appendOrderKey(nil, fsmv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT, 0.0)) {
		t.Fatal("-0 and 0 encode differently")
	}
	// Two fields: the first orders, the second breaks ties, whatever the
	// first's length.
	two := []*fsmv1.IndexField{{Type: fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING}, {Type: fsmv1.IndexFieldType_INDEX_FIELD_TYPE_INT}}
	pair := func(s string, n int64) []byte {
		return appendOrderKey(appendOrderKey(nil, two[0].Type, s), two[1].Type, n)
	}
	ordered := [][]byte{pair("a", -5), pair("a", 3), pair("a\x00", -9), pair("ab", -100), pair("b", 0)}
	for i := 1; i < len(ordered); i++ {
		if bytes.Compare(ordered[i-1], ordered[i]) >= 0 {
			t.Fatalf("pair %d does not sort before pair %d", i-1, i)
		}
	}
}

const (
	tString = fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING
	tInt    = fsmv1.IndexFieldType_INDEX_FIELD_TYPE_INT
	tFloat  = fsmv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT
	tTime   = fsmv1.IndexFieldType_INDEX_FIELD_TYPE_TIME
	tBool   = fsmv1.IndexFieldType_INDEX_FIELD_TYPE_BOOL
)

func dataField(ptr string, typ fsmv1.IndexFieldType) *fsmv1.IndexField {
	return &fsmv1.IndexField{Source: fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, Pointer: ptr, Type: typ}
}

func createIndexCmd(ns string, d *fsmv1.IndexDefinition) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_CreateIndex{CreateIndex: &fsmv1.CreateIndex{Namespace: ns, Definition: d, TimeUnixNano: testTime}}}
}

func deleteIndexCmd(ns, name string) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_DeleteIndex{DeleteIndex: &fsmv1.DeleteIndex{Namespace: ns, Name: name}}}
}

// catchUp runs index rounds of ns until one reaches the end.
func catchUp(t testing.TB, s *Store, ns string) IndexRoundResult {
	t.Helper()
	var total IndexRoundResult
	for i := 0; ; i++ {
		r, err := s.IndexRound(ns, 7) // small rounds: bounds are crossed
		if err != nil {
			t.Fatalf("index round: %v", err)
		}
		total.Read += r.Read
		total.Indexed += r.Indexed
		total.Removed += r.Removed
		total.Skipped += r.Skipped
		total.Failed = append(total.Failed, r.Failed...)
		if !r.More {
			total.Covered = r.Covered
			return total
		}
		if i > 100_000 {
			t.Fatal("index rounds never end")
		}
	}
}

// indexEntries returns the entries of index name: global position ->
// encoded fields.
func indexEntries(t testing.TB, s *Store, ns, name string) map[int64]string {
	t.Helper()
	v := view(t, s, ns)
	d, err := v.indexDef(name)
	if err != nil {
		t.Fatal(err)
	}
	p := indexEntryPrefix(d.Id)
	it, err := v.iter(p, prefixEnd(p))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[int64]string{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		out[keySuffixUint64(k)] = string(k[len(p) : len(k)-8])
	}
	// Every entry has its reverse key, and no reverse key is left over.
	rp := appendUint64(append([]byte(nil), prefixIndexReverse...), d.Id)
	rit, err := v.iter(rp, prefixEnd(rp))
	if err != nil {
		t.Fatal(err)
	}
	defer rit.Close()
	n := 0
	for ok := rit.First(); ok; ok = rit.Next() {
		n++
		if got, ok := out[keySuffixUint64(rit.Key())]; !ok || got != string(rit.Value()) {
			t.Fatalf("reverse key of %d names fields %x, entry %x (present %v)", keySuffixUint64(rit.Key()), rit.Value(), got, ok)
		}
	}
	if n != len(out) {
		t.Fatalf("%d reverse keys for %d entries", n, len(out))
	}
	return out
}

// modelEntries computes index "bal" (category account, data /balance
// int, then data /owner string) from the namespace's messages, with its
// own JSON reading: the expected entries.
func modelEntries(t testing.TB, s *Store, ns string) (map[int64]string, int) {
	t.Helper()
	msgs, err := view(t, s, ns).ReadAll(1, -1)
	if err != nil {
		t.Fatal(err)
	}
	out, skipped := map[int64]string{}, 0
	for _, m := range msgs {
		fields, matched, ok := modelFields(t, m)
		if !matched {
			continue
		}
		if !ok {
			skipped++
			continue
		}
		out[m.GlobalPosition] = fields
	}
	return out, skipped
}

// modelFields is the entry fields of m in "bal" and "last"; matched: m
// is of the source, ok: it has every field.
func modelFields(t testing.TB, m Message) (fields string, matched, ok bool) {
	if Category(m.Stream) != "account" {
		return "", false, false
	}
	var doc map[string]any
	if err := json.Unmarshal(m.Data, &doc); err != nil {
		t.Fatal(err)
	}
	bal, ok1 := doc["balance"].(float64)
	owner, ok2 := doc["owner"].(string)
	if !ok1 || !ok2 || bal != math.Trunc(bal) {
		return "", true, false
	}
	return string(appendOrderKey(appendOrderKey(nil, tInt, int64(bal)), tString, owner)), true, true
}

// modelStreamEntries computes stream index "last" (the source and fields
// of "bal") from the namespace's messages: for each stream, the entry of
// its indexed message of the highest position (global position ->
// fields, and stream -> global position).
func modelStreamEntries(t testing.TB, s *Store, ns string) (map[int64]string, map[string]int64) {
	t.Helper()
	msgs, err := view(t, s, ns).ReadAll(1, -1)
	if err != nil {
		t.Fatal(err)
	}
	latest := map[string]Message{}
	for _, m := range msgs {
		if _, _, ok := modelFields(t, m); ok {
			if old, seen := latest[m.Stream]; !seen || m.Position > old.Position {
				latest[m.Stream] = m
			}
		}
	}
	out, streams := map[int64]string{}, map[string]int64{}
	for stream, m := range latest {
		out[m.GlobalPosition], _, _ = modelFields(t, m)
		streams[stream] = m.GlobalPosition
	}
	return out, streams
}

// streamIndexEntries returns the entries of stream index name (global
// position -> fields, stream -> global position), after checking that
// every entry has its reverse keys (XV by position, XS by stream) and no
// reverse key is left over.
func streamIndexEntries(t testing.TB, s *Store, ns, name string) (map[int64]string, map[string]int64) {
	t.Helper()
	out := indexEntries(t, s, ns, name) // checks XV
	v := view(t, s, ns)
	d, err := v.indexDef(name)
	if err != nil {
		t.Fatal(err)
	}
	p := indexEntryPrefix(d.Id)
	it, err := v.iter(p, prefixEnd(p))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	streams := map[string]int64{}
	for ok := it.First(); ok; ok = it.Next() {
		gp := keySuffixUint64(it.Key())
		if old, dup := streams[string(it.Value())]; dup {
			t.Fatalf("stream %q has two entries: global positions %d and %d", it.Value(), old, gp)
		}
		streams[string(it.Value())] = gp
	}
	sp := appendUint64(append([]byte(nil), prefixIndexStream...), d.Id)
	sit, err := v.iter(sp, prefixEnd(sp))
	if err != nil {
		t.Fatal(err)
	}
	defer sit.Close()
	n := 0
	for ok := sit.First(); ok; ok = sit.Next() {
		n++
		stream := string(sit.Key()[len(sp):])
		val := sit.Value()
		gp := int64(binary.BigEndian.Uint64(val[8:]))
		if streams[stream] != gp || out[gp] != string(val[16:]) {
			t.Fatalf("XS of stream %q names global position %d fields %x; the entry is at %d (fields %x)", stream, gp, val[16:], streams[stream], out[streams[stream]])
		}
	}
	if n != len(streams) {
		t.Fatalf("%d XS keys for %d streams", n, len(streams))
	}
	return out, streams
}

func balanceIndex() *fsmv1.IndexDefinition {
	return &fsmv1.IndexDefinition{Name: "bal", Version: 1, Category: "account", Fields: []*fsmv1.IndexField{dataField("/balance", tInt), dataField("/owner", tString)}}
}

// lastIndex is the stream index of "bal"'s source and fields: each
// account's latest balance and owner.
func lastIndex() *fsmv1.IndexDefinition {
	d := balanceIndex()
	d.Name, d.Kind = "last", fsmv1.IndexKind_INDEX_KIND_STREAM
	return d
}

func accountMsg(balance any, owner string) *fsmv1.NewMessage {
	b, _ := json.Marshal(map[string]any{"balance": balance, "owner": owner})
	return newMsg("Balanced", string(b))
}

// The index equals what its definition computes from the namespace's
// messages after appends, stream deletes, truncates, watermark deletions,
// retention and imports, whether the removal came before the loop read
// the messages or after; a missing or mistyped field is skipped and
// counted.
//
// The same for each storage (indexmem.go): Pebble, memory by the
// definition, and every index in memory (an --in-memory server's store).
func TestIndexMatchesModel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		storage fsmv1.IndexStorage
		opts    func(*Options)
	}{
		{"pebble", fsmv1.IndexStorage_INDEX_STORAGE_UNSPECIFIED, func(*Options) {}},
		{"memory", fsmv1.IndexStorage_INDEX_STORAGE_MEMORY, func(*Options) {}},
		{"memory store", fsmv1.IndexStorage_INDEX_STORAGE_UNSPECIFIED, func(o *Options) { o.IndexMemory = true }},
		// Rounds that end at their byte bounds, after a message or two.
		{"byte bounds", fsmv1.IndexStorage_INDEX_STORAGE_UNSPECIFIED, func(o *Options) {
			o.IndexRoundReadBytes, o.IndexRoundBatchBytes = 300, 200
		}},
		{"memory byte bounds", fsmv1.IndexStorage_INDEX_STORAGE_MEMORY, func(o *Options) {
			o.IndexRoundReadBytes, o.IndexRoundBatchBytes = 300, 200
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testIndexMatchesModel(t, tc.storage, tc.opts) })
	}
}

func testIndexMatchesModel(t *testing.T, storage fsmv1.IndexStorage, opts func(*Options)) {
	s := openTestStore(t, nil, opts)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	rng := rand.New(rand.NewSource(7))
	appendSome := func(n int) {
		for range n {
			stream := fmt.Sprintf("account-%d", rng.Intn(8))
			var m *fsmv1.NewMessage
			switch rng.Intn(10) {
			case 0:
				m = accountMsg("not a number", "x") // mistyped: skipped
			case 1:
				m = newMsg("Opened", `{"owner":"nobody"}`) // missing: skipped
			case 2:
				stream = fmt.Sprintf("other-%d", rng.Intn(3)) // another category
				m = accountMsg(1, "o")
			case 3:
				m = accountMsg(rng.Intn(200)-100, "adjuster")
				m.Type = "Adjusted" // indexed as well: a watermark by type keeps it
			default:
				m = accountMsg(rng.Intn(200)-100, fmt.Sprintf("owner%d", rng.Intn(5)))
			}
			f.must(appendCmd("ns", stream, m))
		}
	}
	check := func(step string) {
		t.Helper()
		catchUp(t, s, "ns")
		want, skipped := modelEntries(t, s, "ns")
		got := indexEntries(t, s, "ns", "bal")
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: index holds %d entries, model %d\ngot  %v\nwant %v", step, len(got), len(want), keysOf(got), keysOf(want))
		}
		info, err := view(t, s, "ns").Index("bal")
		if err != nil {
			t.Fatal(err)
		}
		if info.Entries != int64(len(want)) || info.LagEvents != 0 {
			t.Fatalf("%s: info %+v, want %d entries and no lag", step, info, len(want))
		}
		if step == "appends" && info.Skipped != int64(skipped) {
			t.Fatalf("%s: %d skipped, model %d", step, info.Skipped, skipped)
		}
		wantS, wantStreams := modelStreamEntries(t, s, "ns")
		gotS, gotStreams := streamIndexEntries(t, s, "ns", "last")
		if !reflect.DeepEqual(gotS, wantS) || !reflect.DeepEqual(gotStreams, wantStreams) {
			t.Fatalf("%s: stream index holds %v, model %v", step, gotStreams, wantStreams)
		}
		if info, err := view(t, s, "ns").Index("last"); err != nil || info.Entries != int64(len(wantS)) || info.LagEvents != 0 {
			t.Fatalf("%s: stream index info %+v, %v; want %d entries and no lag", step, info, err, len(wantS))
		}
	}
	// lastOf is the global position of stream's entry in "last".
	lastOf := func(stream string) int64 {
		t.Helper()
		catchUp(t, s, "ns")
		_, streams := streamIndexEntries(t, s, "ns", "last")
		return streams[stream]
	}

	appendSome(60) // before the index: the first rounds build from them
	for _, d := range []*fsmv1.IndexDefinition{balanceIndex(), lastIndex()} {
		d.Storage = storage
		f.must(createIndexCmd("ns", d))
	}

	check("appends")

	// Removals after the loop read the messages.
	f.must(truncateCmd("ns", "account-1", 2))
	f.must(deleteStreamCmd("ns", "account-2", false))
	check("truncate and delete after indexing")

	// A stream's latest indexed message removed while an earlier one
	// stays: the entry moves to it. Later messages that are skipped or of
	// another source do not take the entry.
	adjusted := accountMsg(7, "kept")
	adjusted.Type = "Adjusted"
	res := member[*fsmv1.AppendResult](f.must(appendCmd("ns", "account-9", adjusted, accountMsg(8, "gone"), accountMsg(9, "gone too"), newMsg("Opened", `{"owner":"x"}`))))
	if got := lastOf("account-9"); got != res.FirstGlobalPosition+2 {
		t.Fatalf("account-9's entry is at %d, want %d (its last indexed message)", got, res.FirstGlobalPosition+2)
	}
	f.must(watermarkCmd("ns", "account", []string{"Balanced"}, "account-9", 1000))
	check("latest removed by type")
	if got := lastOf("account-9"); got != res.FirstGlobalPosition {
		t.Fatalf("after the watermark account-9's entry is at %d, want %d (the Adjusted message left)", got, res.FirstGlobalPosition)
	}

	// Removals before the loop reached the messages.
	appendSome(40)
	f.must(truncateCmd("ns", "account-3", 3))
	f.must(deleteStreamCmd("ns", "account-4", false))
	f.must(watermarkCmd("ns", "account", []string{"Balanced"}, "account-5", 1000))
	check("removals before indexing")

	// Removals both before and after, in one call with appends.
	appendSome(30)
	catchUp(t, s, "ns")
	appendSome(30)
	f.apply(truncateCmd("ns", "account-6", 3), appendCmd("ns", "account-6", accountMsg(5, "late")), deleteStreamCmd("ns", "account-7", false))
	check("mixed")

	// Retention: max-count on the category, expired by an entry.
	appendSome(50)
	f.must(policyCmd("ns", fsmv1.RetentionScope_RETENTION_SCOPE_CATEGORY, "account", 0, 2))
	f.must(expireCmd("ns", testTime, 10_000))
	check("retention")

	// An import into a gap below the checkpoint, then a clear.
	// gp is the first removed global position.
	all, err := view(t, s, "ns").ReadAll(1, -1)
	if err != nil {
		t.Fatal(err)
	}
	gp := int64(1)
	for _, m := range all {
		if m.GlobalPosition != gp {
			break
		}
		gp++
	}
	if gp >= all[len(all)-1].GlobalPosition {
		t.Fatal("test setup: no gap below the last message")
	}
	r := rec("account-90", 0, gp, "Balanced")
	r.Data = []byte(`{"balance":42,"owner":"imported"}`)
	f.must(importCmd("ns", false, r))
	check("import into a gap")
	if got := indexEntries(t, s, "ns", "bal")[gp]; got == "" {
		t.Fatal("the imported message is not indexed")
	}
	r2 := rec("account-91", 0, 5, "Balanced")
	r2.Data = []byte(`{"balance":-1,"owner":"fresh"}`)
	f.must(importCmd("ns", true, r2))
	check("import with clear")
	if n := len(indexEntries(t, s, "ns", "bal")); n != 1 {
		t.Fatalf("after the clear the index holds %d entries, want 1", n)
	}
	// The entries are where the storage says: in memory, none on disk.
	h, err := s.acquire("ns")
	if err != nil {
		t.Fatal(err)
	}
	defer s.release(h)
	onDisk := 0
	for _, p := range [][]byte{prefixIndexEntry, prefixIndexReverse, prefixIndexCkpt, prefixIndexStream} {
		it, err := h.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			onDisk++
		}
		it.Close()
	}
	if inMemory := s.isMemoryIndex(&fsmv1.IndexDefinition{Storage: storage}); (onDisk == 0) != inMemory || (h.memIdx.bytes.Load() > 0) != inMemory {
		t.Fatalf("memory storage %v: %d index keys on disk, memory store of %d bytes", inMemory, onDisk, h.memIdx.bytes.Load())
	}
}

func keysOf(m map[int64]string) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// A restart resumes from the checkpoint: the loop reads only the messages
// written since, never the whole namespace again.
func TestIndexRestartResumes(t *testing.T) {
	fs := vfs.NewMem()
	s := openTestStore(t, fs)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", balanceIndex()))
	for i := range 500 {
		f.must(appendCmd("ns", fmt.Sprintf("account-%d", i%10), accountMsg(i, "o")))
	}
	if r := catchUp(t, s, "ns"); r.Read != 500 || r.Indexed != 500 {
		t.Fatalf("first build read %d, indexed %d; want 500", r.Read, r.Indexed)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	next := f.next
	s = openTestStore(t, fs)
	if got := s.IndexedNamespaces(); !reflect.DeepEqual(got, []string{"ns"}) {
		t.Fatalf("indexed namespaces after reopening: %v", got)
	}
	f = &feeder{t: t, s: s, next: next}
	for i := range 7 {
		f.must(appendCmd("ns", "account-1", accountMsg(i, "p")))
	}
	catchUp(t, s, "ns")
	if c := s.IndexCounters(); c.Read != 7 || c.Indexed != 7 {
		t.Fatalf("after the restart the loop read %d messages and indexed %d; want 7 (no rebuild)", c.Read, c.Indexed)
	}
	if n := len(indexEntries(t, s, "ns", "bal")); n != 507 {
		t.Fatalf("index holds %d entries, want 507", n)
	}
}

func queryHits(t testing.TB, s *Store, q IndexQuery) ([]int64, IndexPage) {
	t.Helper()
	page, err := view(t, s, "ns").QueryIndex(q)
	if err != nil {
		t.Fatalf("query %+v: %v", q, err)
	}
	var gps []int64
	for _, h := range page.Hits {
		gps = append(gps, h.GlobalPosition)
		if !q.PositionsOnly && (h.Message == nil || h.Message.GlobalPosition != h.GlobalPosition) {
			t.Fatalf("hit %d carries message %+v", h.GlobalPosition, h.Message)
		}
	}
	return gps, page
}

func TestIndexQuery(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", balanceIndex()))
	// gp i+1 has balance i-10 (-10..9), owners alternate a, b; gp 21..22
	// are owned by "ab" and "b\x00".
	for i := range 20 {
		f.must(appendCmd("ns", "account-1", accountMsg(i-10, []string{"a", "b"}[i%2])))
	}
	f.must(appendCmd("ns", "account-2", accountMsg(0, "ab"), accountMsg(0, "b\x00")))
	catchUp(t, s, "ns")
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		q    IndexQuery
		want []int64
	}{
		{"equal", IndexQuery{Equal: []string{"-3"}}, []int64{8}},
		{"equal two fields", IndexQuery{Equal: []string{"0", "ab"}}, []int64{21}},
		{"equal, ties by global position", IndexQuery{Equal: []string{"0"}}, []int64{11, 21, 22}},
		{"range inclusive", IndexQuery{From: &IndexBound{Value: "-2"}, To: &IndexBound{Value: "1"}}, []int64{9, 10, 11, 21, 22, 12}},
		{"range exclusive", IndexQuery{From: &IndexBound{Value: "-2", Exclusive: true}, To: &IndexBound{Value: "1", Exclusive: true}}, []int64{10, 11, 21, 22}},
		{"range below", IndexQuery{To: &IndexBound{Value: "-9"}}, []int64{1, 2}},
		{"range above, backward", IndexQuery{From: &IndexBound{Value: "8"}, Backward: true}, []int64{20, 19}},
		{"prefix", IndexQuery{Equal: []string{"0"}, Prefix: str("a")}, []int64{11, 21}},
		{"prefix with NUL", IndexQuery{Equal: []string{"0"}, Prefix: str("b")}, []int64{22}},
		{"range on the second field", IndexQuery{Equal: []string{"0"}, From: &IndexBound{Value: "a", Exclusive: true}}, []int64{21, 22}},
		{"limit", IndexQuery{Limit: 3}, []int64{1, 2, 3}},
		{"limit backward", IndexQuery{Limit: 2, Backward: true}, []int64{20, 19}},
		{"empty range", IndexQuery{From: &IndexBound{Value: "5"}, To: &IndexBound{Value: "2"}}, nil},
		{"positions only", IndexQuery{Equal: []string{"9"}, PositionsOnly: true}, []int64{20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.Index = "bal"
			got, page := queryHits(t, s, tc.q)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("hits %v, want %v", got, tc.want)
			}
			if tc.q.Limit == 0 && page.NextCursor != nil {
				t.Fatalf("a complete answer has a cursor %x", page.NextCursor)
			}
		})
	}

	t.Run("values", func(t *testing.T) {
		_, page := queryHits(t, s, IndexQuery{Index: "bal", Equal: []string{"0", "ab"}})
		if want := []any{int64(0), "ab"}; !reflect.DeepEqual(page.Hits[0].Values, want) {
			t.Fatalf("values %v, want %v", page.Hits[0].Values, want)
		}
	})

	t.Run("pages by cursor equal one read", func(t *testing.T) {
		for _, backward := range []bool{false, true} {
			all, _ := queryHits(t, s, IndexQuery{Index: "bal", Backward: backward, Limit: 1000})
			var paged []int64
			var cursor []byte
			for i := 0; ; i++ {
				got, page := queryHits(t, s, IndexQuery{Index: "bal", Backward: backward, Limit: 4, Cursor: cursor})
				paged = append(paged, got...)
				if page.NextCursor == nil {
					break
				}
				cursor = page.NextCursor
				if i > 100 {
					t.Fatal("pages never end")
				}
			}
			if !reflect.DeepEqual(paged, all) || len(all) != 22 {
				t.Fatalf("backward %v: pages %v, one read %v", backward, paged, all)
			}
		}
	})

	t.Run("page bytes", func(t *testing.T) {
		v := view(t, s, "ns")
		v.SetPageBytes(1) // one message per page
		page, err := v.QueryIndex(IndexQuery{Index: "bal"})
		if err != nil || len(page.Hits) != 1 || !page.Capped || page.NextCursor == nil {
			t.Fatalf("page %+v, %v", page, err)
		}
	})

	t.Run("removed messages are not returned before the loop drops them", func(t *testing.T) {
		f.must(truncateCmd("ns", "account-2", 1)) // gp 21
		for _, positions := range []bool{false, true} {
			got, _ := queryHits(t, s, IndexQuery{Index: "bal", Equal: []string{"0"}, PositionsOnly: positions})
			if !reflect.DeepEqual(got, []int64{11, 22}) {
				t.Fatalf("positions only %v: hits %v, want [11 22]", positions, got)
			}
		}
	})

	for _, tc := range []struct {
		name  string
		q     IndexQuery
		field string
	}{
		{"value of another type", IndexQuery{Equal: []string{"x"}}, "equal[0]"},
		{"too many values", IndexQuery{Equal: []string{"1", "a", "b"}}, "equal"},
		{"prefix on an int", IndexQuery{Prefix: str("1")}, "prefix"},
		{"prefix and range", IndexQuery{Equal: []string{"1"}, Prefix: str("a"), From: &IndexBound{Value: "a"}}, "prefix"},
		{"range after every field", IndexQuery{Equal: []string{"1", "a"}, From: &IndexBound{Value: "a"}}, "equal"},
		{"bad bound", IndexQuery{From: &IndexBound{Value: "1.5"}}, "from"},
		{"foreign cursor", IndexQuery{Equal: []string{"1"}, Cursor: []byte("XE\x00")}, "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.Index = "bal"
			_, err := view(t, s, "ns").QueryIndex(tc.q)
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("error %v, want a ValidationError of %s", err, tc.field)
			}
		})
	}
	if _, err := view(t, s, "ns").QueryIndex(IndexQuery{Index: "nope"}); !errors.Is(err, ErrIndexNotFound) {
		t.Fatalf("query of an unknown index: %v", err)
	}
}

// Bad definitions are refused by name of the field, in apply as at the
// edge, and change nothing.
func TestIndexDefinitionRefused(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	ok := balanceIndex
	for _, tc := range []struct {
		name  string
		mod   func(*fsmv1.IndexDefinition)
		field string
	}{
		{"no name", func(d *fsmv1.IndexDefinition) { d.Name = "" }, "name"},
		{"bad name", func(d *fsmv1.IndexDefinition) { d.Name = "a/b" }, "name"},
		{"no source", func(d *fsmv1.IndexDefinition) { d.Category = "" }, "source"},
		{"category with dash", func(d *fsmv1.IndexDefinition) { d.Category = "account-1" }, "category"},
		{"empty type", func(d *fsmv1.IndexDefinition) { d.Types = []string{""} }, "types[0]"},
		{"bad query", func(d *fsmv1.IndexDefinition) { d.Query = &fsmv1.Query{} }, "query.items"},
		{"no fields", func(d *fsmv1.IndexDefinition) { d.Fields = nil }, "fields"},
		{"too many fields", func(d *fsmv1.IndexDefinition) {
			for range MaxIndexFields {
				d.Fields = append(d.Fields, dataField("/x", tInt))
			}
		}, "fields"},
		{"pointer without slash", func(d *fsmv1.IndexDefinition) { d.Fields[0].Pointer = "balance" }, "fields[0].pointer"},
		{"pointer with bad escape", func(d *fsmv1.IndexDefinition) { d.Fields[1].Pointer = "/a~2" }, "fields[1].pointer"},
		{"no type", func(d *fsmv1.IndexDefinition) { d.Fields[0].Type = 0 }, "fields[0].type"},
		{"no source of field", func(d *fsmv1.IndexDefinition) { d.Fields[0].Source = 0 }, "fields[0].source"},
		{"type field as int", func(d *fsmv1.IndexDefinition) {
			d.Fields[0] = &fsmv1.IndexField{Source: fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_TYPE, Type: tInt}
		}, "fields[0].type"},
		{"time field as string", func(d *fsmv1.IndexDefinition) {
			d.Fields[0] = &fsmv1.IndexField{Source: fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_TIME, Type: tString}
		}, "fields[0].type"},
		{"pointer on stream", func(d *fsmv1.IndexDefinition) {
			d.Fields[0] = &fsmv1.IndexField{Source: fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_STREAM, Type: tString, Pointer: "/x"}
		}, "fields[0].pointer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := ok()
			tc.mod(d)
			var ve *ValidationError
			if err := ValidateIndexDefinition(d); !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("validate: %v, want a ValidationError of %s", err, tc.field)
			}
			before := contentHash(t, s)
			if err, _ := f.apply(createIndexCmd("ns", d))[0].(error); !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("apply: %v, want a ValidationError of %s", err, tc.field)
			}
			if contentHash(t, s) != before {
				t.Fatal("a refused definition changed the store")
			}
		})
	}
	f.must(createIndexCmd("ns", ok()))
	if err, _ := f.apply(createIndexCmd("ns", ok()))[0].(error); !errors.Is(err, ErrIndexExists) {
		t.Fatalf("second create: %v", err)
	}
	if err, _ := f.apply(deleteIndexCmd("ns", "nope"))[0].(error); !errors.Is(err, ErrIndexNotFound) {
		t.Fatalf("delete of an unknown index: %v", err)
	}
	if err, _ := f.apply(createIndexCmd("nope", ok()))[0].(error); !errors.Is(err, ErrNamespaceNotFound) {
		t.Fatalf("create in an unknown namespace: %v", err)
	}
}

// Deleting an index drops its definition at once and its entries at the
// loop's next round; a re-created index of the same name starts empty and
// builds from the messages. Replicas whose loops ran and did not compare
// equal: entries are node-local.
func TestIndexDeleteAndRecreate(t *testing.T) {
	a, b := openTestStore(t, nil), openTestStore(t, nil)
	fa, fb := newFeeder(t, a), newFeeder(t, b)
	both := func(c *fsmv1.Command) {
		fa.must(c)
		fb.must(c)
	}
	both(createNS("ns"))
	both(createIndexCmd("ns", balanceIndex()))
	for i := range 30 {
		both(appendCmd("ns", "account-1", accountMsg(i, "o")))
	}
	catchUp(t, a, "ns") // b's loop never ran
	if contentHash(t, a) != contentHash(t, b) {
		t.Fatal("replicas differ in replicated state because one indexed")
	}
	both(deleteIndexCmd("ns", "bal"))
	if _, err := view(t, a, "ns").Index("bal"); !errors.Is(err, ErrIndexNotFound) {
		t.Fatalf("info after delete: %v", err)
	}
	catchUp(t, a, "ns")
	v := view(t, a, "ns")
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: indexFamilyLo, UpperBound: indexFamilyHi})
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		t.Errorf("key %q left after the index was deleted", it.Key())
	}
	it.Close()
	d := balanceIndex()
	d.Fields = d.Fields[:1]
	both(createIndexCmd("ns", d))
	catchUp(t, a, "ns")
	if n := len(indexEntries(t, a, "ns", "bal")); n != 30 {
		t.Fatalf("re-created index holds %d entries, want 30", n)
	}
	if contentHash(t, a) != contentHash(t, b) {
		t.Fatal("replicas differ in replicated state")
	}
}

// Fields of every source and type: type, stream and time; floats, times
// and bools in data; a pointer into metadata and an array.
func TestIndexFieldSources(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	src := func(s fsmv1.IndexFieldSource, typ fsmv1.IndexFieldType, ptr string) *fsmv1.IndexField {
		return &fsmv1.IndexField{Source: s, Type: typ, Pointer: ptr}
	}
	f.must(createIndexCmd("ns", &fsmv1.IndexDefinition{Name: "all", Types: []string{"T"}, Fields: []*fsmv1.IndexField{
		src(fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_TYPE, tString, ""),
		src(fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_STREAM, tString, ""),
		src(fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_TIME, tTime, ""),
		src(fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, tFloat, "/f"),
		src(fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, tTime, "/at"),
		src(fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, tBool, "/a~1b/1"),
		src(fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_METADATA, tString, "/who"),
	}}))
	f.must(appendCmd("ns", "s-1", withMeta(newMsg("T", `{"f":-1.5,"at":"2020-01-02T03:04:05.5Z","a/b":[false,true]}`), `{"who":"me"}`)))
	f.must(appendCmd("ns", "s-1", newMsg("T", `{"f":1,"at":"2020-01-02T03:04:05Z","a/b":[true]}`))) // index 1 missing
	f.must(appendCmd("ns", "s-1", newMsg("U", `{}`)))                                               // another type
	r := catchUp(t, s, "ns")
	if r.Indexed != 1 || r.Skipped != 1 {
		t.Fatalf("indexed %d, skipped %d; want 1 and 1", r.Indexed, r.Skipped)
	}
	_, page := queryHits(t, s, IndexQuery{Index: "all", Equal: []string{"T", "s-1"}})
	want := []any{"T", "s-1", testTime, -1.5, time.Date(2020, 1, 2, 3, 4, 5, 5e8, time.UTC).UnixNano(), true, "me"}
	if len(page.Hits) != 1 || !reflect.DeepEqual(page.Hits[0].Values, want) {
		t.Fatalf("hits %+v, want one with values %v", page.Hits, want)
	}
}

// WaitIndexed returns once a round covers the index, and at the context's
// end otherwise.
func TestWaitIndexed(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", balanceIndex()))
	f.must(appendCmd("ns", "account-1", accountMsg(1, "o")))
	idx := s.AppliedIndex()
	ctx, cancel := contextWithTimeout(20 * time.Millisecond)
	defer cancel()
	if err := s.WaitIndexed(ctx, "ns", "", idx); err == nil {
		t.Fatal("WaitIndexed returned before any round")
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := contextWithTimeout(10 * time.Second)
		defer cancel()
		done <- s.WaitIndexed(ctx, "ns", "", idx)
	}()
	if r := catchUp(t, s, "ns"); r.Covered < idx {
		t.Fatalf("round covers %d, want %d", r.Covered, idx)
	}
	if err := <-done; err != nil {
		t.Fatalf("WaitIndexed after the round: %v", err)
	}
	if got := s.IndexCovered("ns"); got < idx {
		t.Fatalf("IndexCovered %d, want at least %d", got, idx)
	}
}

// Each index has its own coverage: one that builds holds back neither
// the waits nor the state of a sibling that follows the namespace, even
// when every round ends at its bound inside the building one.
func TestIndexCoverageByIndex(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createIndexCmd("ns", balanceIndex()))
	for i := range 300 {
		f.must(appendCmd("ns", fmt.Sprintf("account-%d", i%7), accountMsg(i, "o")))
	}
	catchUp(t, s, "ns")
	// Named to sort first: rounds must still serve the healthy one first.
	building := lastIndex()
	building.Name = "all"
	f.must(createIndexCmd("ns", building)) // builds from 300 messages
	for step := range 3 {
		f.must(appendCmd("ns", "account-1", accountMsg(1000+step, "new")))
		applied := s.AppliedIndex()
		r, err := s.IndexRound("ns", 40)
		if err != nil {
			t.Fatal(err)
		}
		if !r.More || len(r.CoveredIDs) != 1 {
			t.Fatalf("step %d: round %+v, want one index covered and more to do", step, r)
		}
		ctx, cancel := contextWithTimeout(10 * time.Second)
		err = s.WaitIndexed(ctx, "ns", "bal", applied)
		cancel()
		if err != nil {
			t.Fatalf("step %d: waiting for the healthy index: %v", step, err)
		}
		ctx, cancel = contextWithTimeout(20 * time.Millisecond)
		err = s.WaitIndexed(ctx, "ns", "all", applied)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("step %d: waiting for the building index: %v, want the deadline", step, err)
		}
		v := view(t, s, "ns")
		bal, err := v.Index("bal")
		if err != nil {
			t.Fatal(err)
		}
		last, err := v.Index("all")
		if err != nil {
			t.Fatal(err)
		}
		if !bal.Built || bal.Covered < applied || bal.LagEvents != 0 || last.Built || last.Covered != 0 {
			t.Fatalf("step %d: bal %+v, last %+v; want bal built and covering %d, last building", step, bal, last, applied)
		}
		if got := v.IndexCovered("bal"); got < applied {
			t.Fatalf("step %d: the view's coverage of bal is %d, want %d", step, got, applied)
		}
		if s.IndexCovered("ns") >= applied {
			t.Fatalf("step %d: the namespace counts as covered while an index builds", step)
		}
	}
	r := catchUp(t, s, "ns")
	if v := view(t, s, "ns"); v.IndexCovered("all") < r.Covered || s.IndexCovered("ns") < r.Covered {
		t.Fatalf("after the build: last covers %d, the namespace %d; want %d", v.IndexCovered("all"), s.IndexCovered("ns"), r.Covered)
	}
	// A deleted index leaves the coverage.
	f.must(deleteIndexCmd("ns", "all"))
	catchUp(t, s, "ns")
	if n := len(s.mu.namespaces["ns"].indexer.coverage()); n != 1 {
		t.Fatalf("coverage holds %d indexes after a delete, want 1", n)
	}
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.WaitIndexed(ctx, "ns", "all", s.AppliedIndex()); err != nil {
		t.Fatalf("waiting for a deleted index: %v, want nil (the read reports it)", err)
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// An index is building (progress, lag in events and time) until a round
// reaches the end of the namespace, then healthy.
func TestIndexStates(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	for i := range 50 {
		f.must(appendCmd("ns", "account-1", accountMsg(i, "o")))
	}
	f.must(createIndexCmd("ns", balanceIndex()))
	info, err := view(t, s, "ns").Index("bal")
	if err != nil || info.Built || info.Progress != 0 || info.LagEvents != 50 || info.LagTime <= 0 {
		t.Fatalf("before any round: %+v, %v", info, err)
	}
	if r, err := s.IndexRound("ns", 10); err != nil || !r.More {
		t.Fatalf("round: %+v, %v", r, err)
	}
	info, _ = view(t, s, "ns").Index("bal")
	if info.Built || info.Checkpoint != 10 || info.Progress != 0.2 || info.LagEvents != 40 {
		t.Fatalf("after a round of 10: %+v", info)
	}
	catchUp(t, s, "ns")
	info, _ = view(t, s, "ns").Index("bal")
	if !info.Built || info.Progress != 1 || info.LagEvents != 0 || info.LagTime != 0 || info.ETA != 0 {
		t.Fatalf("caught up: %+v", info)
	}
	f.must(appendCmd("ns", "account-1", accountMsg(1, "o")))
	info, _ = view(t, s, "ns").Index("bal")
	if !info.Built || info.LagEvents != 1 || info.LagTime <= 0 {
		t.Fatalf("healthy and behind by one: %+v", info)
	}
}

// TestIndexLagAfterDeletedTail: an index created after the namespace's
// last messages were deleted holds every message there is, so it lags by
// none (the positions of the deleted ones are past its checkpoint).
func TestIndexLagAfterDeletedTail(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(appendCmd("ns", "account-1", accountMsg(1, "o")))
	f.must(appendCmd("ns", "account-2", accountMsg(2, "o")))
	f.must(deleteStreamCmd("ns", "account-2", true))
	f.must(createIndexCmd("ns", balanceIndex()))
	catchUp(t, s, "ns")
	info, err := view(t, s, "ns").Index("bal")
	if err != nil || !info.Built || info.Entries != 1 || info.LagEvents != 0 || info.LagTime != 0 {
		t.Fatalf("caught up after a deleted tail: %+v, %v", info, err)
	}
	f.must(appendCmd("ns", "account-1", accountMsg(3, "o")))
	if info, _ := view(t, s, "ns").Index("bal"); info.LagEvents != 1 || info.LagTime <= 0 {
		t.Fatalf("behind by the new message: %+v", info)
	}
}

func rebuildIndexCmd(ns, name string, d *fsmv1.IndexDefinition) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_RebuildIndex{RebuildIndex: &fsmv1.RebuildIndex{Namespace: ns, Name: name, Definition: d, TimeUnixNano: testTime}}}
}

// idKeys counts the XE, XV and XC keys of index id.
func idKeys(t *testing.T, s *Store, id uint64) int {
	t.Helper()
	v := view(t, s, "ns")
	n := 0
	for _, p := range [][]byte{indexEntryPrefix(id), appendUint64(append([]byte(nil), prefixIndexReverse...), id), indexCkptKey(id)} {
		it, err := v.iter(p, prefixEnd(p))
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		it.Close()
	}
	return n
}

// A rebuild under a new definition builds beside the current one, which
// answers queries until the new one is built on this node and then
// replaces it (its keys dropped); a second rebuild while one is pending
// promotes the pending one; a delete drops both; bad rebuilds change
// nothing.
func TestIndexRebuild(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	v1 := member[*fsmv1.IndexResult](f.must(createIndexCmd("ns", balanceIndex()))).Definition
	for i := range 200 {
		f.must(appendCmd("ns", fmt.Sprintf("account-%d", i%5), accountMsg(i, fmt.Sprintf("owner%d", i%4))))
	}
	catchUp(t, s, "ns")
	byOwner := &fsmv1.IndexDefinition{Name: "bal", Version: 2, Category: "account", Fields: []*fsmv1.IndexField{dataField("/owner", tString)}}
	answer := f.must(rebuildIndexCmd("ns", "bal", byOwner))
	v2 := member[*fsmv1.IndexResult](answer).Definition
	if v2.Id != answer.(*fsmv1.Result).Index || v2.Version != 2 || v2.Kind != fsmv1.IndexKind_INDEX_KIND_EVENT {
		t.Fatalf("rebuild result %+v", v2)
	}
	answers := func(step string, wantVersion uint32, rebuilding bool) {
		t.Helper()
		info, err := view(t, s, "ns").Index("bal")
		if err != nil {
			t.Fatal(err)
		}
		if info.Definition.Version != wantVersion || (info.Rebuilding != nil) != rebuilding {
			t.Fatalf("%s: answers from version %d (rebuilding %v), want %d (%v)", step, info.Definition.Version, info.Rebuilding != nil, wantVersion, rebuilding)
		}
		var q IndexQuery
		if wantVersion == 1 {
			q = IndexQuery{Index: "bal", Equal: []string{"7"}, PositionsOnly: true}
		} else {
			q = IndexQuery{Index: "bal", Equal: []string{"owner3"}, PositionsOnly: true, Limit: 1000}
		}
		gps, _ := queryHits(t, s, q)
		if want := map[uint32]int{1: 1, 2: 50}[wantVersion]; len(gps) != want {
			t.Fatalf("%s: query %+v finds %d entries, want %d", step, q, len(gps), want)
		}
	}
	answers("before any round", 1, true)
	r, err := s.IndexRound("ns", 60)
	if err != nil || !r.More {
		t.Fatalf("partial round: %+v, %v", r, err)
	}
	answers("partly built", 1, true)
	if info, _ := view(t, s, "ns").Index("bal"); info.Rebuilding.Built || info.Rebuilding.Progress <= 0 || info.Rebuilding.Progress >= 1 {
		t.Fatalf("rebuild progress %+v", info.Rebuilding)
	}
	_, oldPage := queryHits(t, s, IndexQuery{Index: "bal", From: &IndexBound{Value: "0"}, Limit: 1, PositionsOnly: true})
	catchUp(t, s, "ns")
	answers("built", 2, false)
	// A cursor of the old definition's page is refused after the switch.
	var ve *ValidationError
	if _, err := view(t, s, "ns").QueryIndex(IndexQuery{Index: "bal", Limit: 1, Cursor: oldPage.NextCursor}); !errors.As(err, &ve) || ve.Field != "cursor" {
		t.Fatalf("a cursor of the replaced definition: %v, want a validation error of cursor", err)
	}
	if n := idKeys(t, s, v1.Id); n != 0 {
		t.Fatalf("the replaced definition keeps %d keys", n)
	}
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.WaitIndexed(ctx, "ns", "bal", s.AppliedIndex()); err != nil {
		t.Fatalf("waiting for the rebuilt index: %v", err)
	}

	// The same definition again, then a new one while it is pending: the
	// pending one becomes current, the old current goes.
	same := member[*fsmv1.IndexResult](f.must(rebuildIndexCmd("ns", "bal", nil))).Definition
	if same.Version != 2 || same.Id == v2.Id {
		t.Fatalf("rebuild of the same definition: %+v", same)
	}
	answers("same definition, pending", 2, true)
	third := member[*fsmv1.IndexResult](f.must(rebuildIndexCmd("ns", "bal", balanceIndex()))).Definition
	catchUp(t, s, "ns")
	info, err := view(t, s, "ns").Index("bal")
	if err != nil || info.Definition.Id != third.Id || idKeys(t, s, v2.Id) != 0 || idKeys(t, s, same.Id) != 0 {
		t.Fatalf("after two rebuilds: answers from %d, want %d; keys of v2 %d, of the promoted %d; %v",
			info.Definition.GetId(), third.Id, idKeys(t, s, v2.Id), idKeys(t, s, same.Id), err)
	}
	answers("rebuilt twice", 1, false)

	// Refusals change nothing.
	wrongName := balanceIndex()
	wrongName.Name = "other"
	for _, tc := range []struct {
		name string
		cmd  *fsmv1.Command
		want error
	}{
		{"unknown index", rebuildIndexCmd("ns", "nope", nil), ErrIndexNotFound},
		{"another name", rebuildIndexCmd("ns", "bal", wrongName), &ValidationError{Field: "definition.name"}},
		{"bad definition", rebuildIndexCmd("ns", "bal", &fsmv1.IndexDefinition{Name: "bal", Category: "account"}), &ValidationError{Field: "fields"}},
		{"unknown namespace", rebuildIndexCmd("nope", "bal", nil), ErrNamespaceNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, _ := f.apply(tc.cmd)[0].(error)
			var ve *ValidationError
			if want, ok := tc.want.(*ValidationError); ok {
				if !errors.As(err, &ve) || ve.Field != want.Field {
					t.Fatalf("error %v, want a validation error of %s", err, want.Field)
				}
			} else if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
	if info, _ := view(t, s, "ns").Index("bal"); info.Definition.Id != third.Id || info.Rebuilding != nil {
		t.Fatalf("refused rebuilds changed the index: %+v", info)
	}

	// A delete while a rebuild is pending drops both.
	pending := member[*fsmv1.IndexResult](f.must(rebuildIndexCmd("ns", "bal", nil))).Definition
	r, err = s.IndexRound("ns", 10)
	if err != nil || idKeys(t, s, pending.Id) == 0 {
		t.Fatalf("the pending rebuild has no keys after a round: %v", err)
	}
	f.must(deleteIndexCmd("ns", "bal"))
	catchUp(t, s, "ns")
	if a, b := idKeys(t, s, third.Id), idKeys(t, s, pending.Id); a != 0 || b != 0 {
		t.Fatalf("after the delete: %d keys of the current definition, %d of the pending rebuild", a, b)
	}
}
