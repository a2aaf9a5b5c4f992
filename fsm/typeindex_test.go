package fsm

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// createNSAllTypes is a create as the leader proposes it once every server
// knows the type index of every message.
func createNSAllTypes(name string) *fsmv1.Command {
	c := createNS(name)
	c.GetCreateNamespace().IndexAllTypes = true
	return c
}

func indexTypesCmd(ns string, maxKeys int64) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_IndexTypes{IndexTypes: &fsmv1.IndexTypes{Namespace: ns, MaxKeys: maxKeys}}}
}

// matchesAll is the model of a complete type index: every message is in
// it, so types alone match untagged messages too.
func matchesAll(q Query, m Message) bool {
	for _, it := range q.Items {
		if len(it.Types) > 0 && !slices.Contains(it.Types, m.Type) {
			continue
		}
		all := true
		for _, t := range it.Tags {
			all = all && slices.Contains(m.Tags, t)
		}
		if all {
			return true
		}
	}
	return false
}

// In a namespace whose type index is complete, queries and conditions of
// types alone see untagged messages; tags work as before.
func TestTypeIndexSeesUntagged(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNSAllTypes("ns"))
	// gp: 1 Opened (untagged) | 2 Enrolled c1 | 3 Opened (untagged) | 4 Left c1 | 5 Closed (untagged)
	f.must(appendCmd("ns", "account-1", newMsg("Opened", `{}`), tagged("Enrolled", "course:c1")))
	f.must(appendCmd("ns", "account-2", newMsg("Opened", `{}`)))
	f.must(appendCmd("ns", "account-1", tagged("Left", "course:c1"), newMsg("Closed", `{}`)))
	cases := []struct {
		name  string
		q     Query
		after int64
		want  []int64
	}{
		{"type of untagged messages", Query{[]QueryItem{item([]string{"Opened"})}}, 0, []int64{1, 3}},
		{"types or'd, tagged and not", Query{[]QueryItem{item([]string{"Closed", "Enrolled"})}}, 0, []int64{2, 5}},
		{"after", Query{[]QueryItem{item([]string{"Opened"})}}, 1, []int64{3}},
		{"type and tag: untagged never carry the tag", Query{[]QueryItem{item([]string{"Opened", "Left"}, "course:c1")}}, 0, []int64{4}},
		{"tag alone", Query{[]QueryItem{item(nil, "course:c1")}}, 0, []int64{2, 4}},
		{"items or'd", Query{[]QueryItem{item([]string{"Closed"}), item(nil, "course:c1")}}, 0, []int64{2, 4, 5}},
		{"unknown type", Query{[]QueryItem{item([]string{"Nope"})}}, 0, []int64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := view(t, s, "ns").Query(tc.q, tc.after, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gpsOf(got), tc.want) {
				t.Fatalf("Query = %v, want %v", gpsOf(got), tc.want)
			}
		})
	}
	if ok, err := view(t, s, "ns").TypeIndexComplete(); err != nil || !ok {
		t.Fatalf("TypeIndexComplete = %v, %v; want true", ok, err)
	}
	if p := s.TypeIndexPending(); len(p) != 0 {
		t.Fatalf("TypeIndexPending = %v, want none", p)
	}

	// Conditions: an untagged message of the type fails it, in the
	// database and among the messages staged by the same call.
	r := f.apply(conditional(appendCmd("ns", "account-3", newMsg("Opened", `{}`)), cond(3, item([]string{"Closed"}))))[0]
	var cf *ConditionFailedError
	if !errors.As(asError(r), &cf) || cf.GlobalPosition != 5 {
		t.Fatalf("condition on Closed after 3 = %v, want failed at 5 (an untagged message)", r)
	}
	rs := f.apply(
		appendCmd("ns", "account-3", newMsg("Frozen", `{}`)), // 6
		conditional(appendCmd("ns", "account-4", newMsg("Opened", `{}`)), cond(5, item([]string{"Frozen"}))),
	)
	if !errors.As(asError(rs[1]), &cf) || cf.GlobalPosition != 6 {
		t.Fatalf("condition on a Frozen staged in the same call = %v, want failed at 6", rs[1])
	}
}

func asError(r any) error {
	err, _ := r.(error)
	return err
}

// A legacy namespace (created without index_all_types, as every namespace
// written before the type index) keeps the old meaning until IndexTypes
// entries have walked all of it; the entry that ends the walk switches it.
// Messages written during the backfill, removed messages and bounds that
// end on the last key are all accounted for.
func TestTypeIndexBackfill(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	types := []string{"A", "B", "C"}
	var every, tagged0 []int64 // A messages, and the tagged ones among them
	gp := int64(0)
	for i := range 40 {
		typ := types[i%3]
		m := newMsg(typ, `{}`)
		if i%5 == 0 {
			m = tagged(typ, "t")
		}
		f.must(appendCmd("ns", fmt.Sprintf("s%d-%d", i%4, i%7), m))
		gp++
		if typ == "A" {
			every = append(every, gp)
			if i%5 == 0 {
				tagged0 = append(tagged0, gp)
			}
		}
	}
	f.must(truncateCmd("ns", "s0-0", 1)) // removes gp 1, a tagged A
	every, tagged0 = every[1:], tagged0[1:]
	qA := Query{[]QueryItem{item([]string{"A"})}}
	check := func(want []int64, complete bool) {
		t.Helper()
		got, err := view(t, s, "ns").Query(qA, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gpsOf(got), append([]int64{}, want...)) {
			t.Fatalf("Query A = %v, want %v", gpsOf(got), want)
		}
		if ok, _ := view(t, s, "ns").TypeIndexComplete(); ok != complete {
			t.Fatalf("TypeIndexComplete = %v, want %v", ok, complete)
		}
		if pending := slices.Contains(s.TypeIndexPending(), "ns"); pending == complete {
			t.Fatalf("TypeIndexPending holds ns: %v, complete %v", pending, complete)
		}
	}
	check(tagged0, false)

	// The walk goes over the 39 TI keys left, 10 per entry; an untagged A
	// written meanwhile is indexed by its own write (its TI key sorts
	// before the walk's cursor by then, so the walk does not meet it).
	// Until the last entry, queries keep the legacy meaning: tagged
	// messages only.
	var results []*fsmv1.IndexTypesResult
	for i := 0; ; i++ {
		r := member[*fsmv1.IndexTypesResult](f.must(indexTypesCmd("ns", 10)))
		results = append(results, r)
		if r.Complete {
			break
		}
		if i == 1 {
			f.must(appendCmd("ns", "late-1", newMsg("A", `{}`)))
			gp++
			every = append(every, gp)
		}
		check(tagged0, false)
	}
	walked := int64(0)
	for _, r := range results {
		walked += r.Walked
	}
	if len(results) != 4 || walked != 39 {
		t.Fatalf("backfill of 39 keys by 10 took %d entries, walked %d: %+v", len(results), walked, results)
	}
	check(every, true)
	if r := member[*fsmv1.IndexTypesResult](f.must(indexTypesCmd("ns", 10))); !r.Complete || r.Walked != 0 {
		t.Fatalf("IndexTypes on a complete namespace = %+v, want complete, nothing walked", r)
	}
	if r := f.apply(indexTypesCmd("ns", 0))[0]; !strings.Contains(fmt.Sprint(r), "max_keys") {
		t.Fatalf("IndexTypes max_keys 0 = %v, want a validation error", r)
	}
	if r := f.apply(indexTypesCmd("nope", 10))[0]; !errors.Is(asError(r), ErrNamespaceNotFound) {
		t.Fatalf("IndexTypes of an unknown namespace = %v", r)
	}
	// Complete: new untagged messages are indexed, and QT no longer
	// grows (tagged messages are in QA).
	qt := countKeys(t, s, "ns", prefixTypeIdx)
	f.must(appendCmd("ns", "late-2", newMsg("A", `{}`), tagged("A", "t")))
	every = append(every, gp+1, gp+2)
	check(every, true)
	if n := countKeys(t, s, "ns", prefixTypeIdx); n != qt {
		t.Fatalf("QT keys %d -> %d after completion", qt, n)
	}
}

// The index, the state and every verdict depend only on the log: the same
// log in differently cut batches, and replayed after a restart, ends in
// the same results and keys. The log mixes a legacy start, a backfill
// interleaved with writes and conditional writes on types alone, removals
// and an import's clear.
func TestTypeIndexDeterministic(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(11))
	cmds := []*fsmv1.Command{createNS("ns")}
	types := []string{"A", "B", "C"}
	gp := int64(0)
	for i := range 150 {
		typ := types[rng.Intn(3)]
		m := newMsg(typ, `{}`)
		if rng.Intn(4) == 0 {
			m = tagged(typ, "t")
		}
		c := appendCmd("ns", fmt.Sprintf("s-%d", rng.Intn(6)), m)
		switch {
		case i == 40:
			cmds = append(cmds, importCmd("ns", true, rec("i-1", 0, 5, "A"), rec("i-1", 1, 9, "B")))
			continue
		case i%15 == 7:
			cmds = append(cmds, truncateCmd("ns", fmt.Sprintf("s-%d", rng.Intn(6)), int64(rng.Intn(3))))
			continue
		case i >= 20 && i%4 == 0:
			cmds = append(cmds, indexTypesCmd("ns", int64(1+rng.Intn(6))))
			continue
		case i%3 == 0:
			c = conditional(c, cond(max(gp-int64(rng.Intn(5)), 0), item([]string{types[rng.Intn(3)]})))
		}
		cmds = append(cmds, c)
		gp += int64(i % 2)
	}
	logs := commandEntries(t, 1, cmds...)
	var want []string
	var wantHash string
	for _, split := range []int{1, 3, 7, len(logs)} {
		s := openTestStore(t, nil)
		var got []string
		for i := 0; i < len(logs); i += split {
			for _, r := range s.ApplyBatch(logs[i:min(i+split, len(logs))]) {
				got = append(got, answerKind(r)+" "+fmt.Sprintf("%+v", r))
			}
		}
		h := contentHash(t, s)
		if want == nil {
			want, wantHash = got, h
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("batches of %d answered otherwise than batches of 1:\n%v\n%v", split, got, want)
		}
		if h != wantHash {
			t.Fatalf("batches of %d end in another state than batches of 1", split)
		}
	}
	failed, completed := 0, 0
	for _, r := range want {
		failed += strings.Count(r, "condition failed")
		completed += len(completeTrue.FindAllString(r, -1))
	}
	if failed < 5 || completed < 2 {
		t.Fatalf("the log tests little: %d conditions failed, %d IndexTypes complete", failed, completed)
	}
}

// Random logs with untagged messages in a complete namespace: every query
// answers what the model says.
func TestTypeIndexMatchesModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(5))
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNSAllTypes("ns"))
	types := []string{"A", "B", "C"}
	tags := []string{"x:1", "x:2", "y", "z"}
	pick := func(from []string, n int) []string {
		out := slices.Clone(from)
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out[:n]
	}
	for range 300 {
		var msgs []*fsmv1.NewMessage
		for range 1 + rng.Intn(3) {
			msgs = append(msgs, tagged(types[rng.Intn(3)], pick(tags, rng.Intn(3))...))
		}
		f.must(appendCmd("ns", fmt.Sprintf("s-%d", rng.Intn(20)), msgs...))
	}
	all, err := view(t, s, "ns").ReadAll(1, -1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		var q Query
		for range 1 + rng.Intn(3) {
			// Types alone in most items: what the complete index changes.
			q.Items = append(q.Items, item(pick(types, 1+rng.Intn(2)), pick(tags, rng.Intn(2))...))
		}
		after := int64(rng.Intn(len(all)))
		want := []int64{}
		for _, m := range all {
			if m.GlobalPosition > after && matchesAll(q, m) {
				want = append(want, m.GlobalPosition)
			}
		}
		got, err := view(t, s, "ns").Query(q, after, -1)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gpsOf(got), want) {
			t.Fatalf("query %d %+v after %d = %v, want %v", i, q, after, gpsOf(got), want)
		}
	}
}

// An import's clear empties the namespace: a backfilling index has nothing
// left to walk and is complete; a legacy one stays legacy.
func TestTypeIndexImportClear(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		start    int64 // IndexTypes entries before the clear (max_keys 1)
		complete bool
	}{{"legacy", 0, false}, {"backfilling", 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, nil)
			f := newFeeder(t, s)
			f.must(createNS("ns"))
			f.must(appendCmd("ns", "a-1", newMsg("A", `{}`), newMsg("A", `{}`)))
			for range tc.start {
				if r := member[*fsmv1.IndexTypesResult](f.must(indexTypesCmd("ns", 1))); r.Complete {
					t.Fatalf("complete after one key of two: %+v", r)
				}
			}
			f.must(importCmd("ns", true, rec("b-1", 0, 3, "A")))
			got, err := view(t, s, "ns").Query(Query{[]QueryItem{item([]string{"A"})}}, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			want := []int64{}
			if tc.complete {
				want = []int64{3}
			}
			if !reflect.DeepEqual(gpsOf(got), want) {
				t.Fatalf("Query A after the clear = %v, want %v", gpsOf(got), want)
			}
			if ok, _ := view(t, s, "ns").TypeIndexComplete(); ok != tc.complete {
				t.Fatalf("TypeIndexComplete = %v, want %v", ok, tc.complete)
			}
		})
	}
}

// completeTrue matches an IndexTypesResult's complete field set, in the
// text form of a Result (which may put a space after the colon).
var completeTrue = regexp.MustCompile(`complete:\s*true`)
