package fsm

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

func tagged(typ string, tags ...string) *fsmv1.NewMessage {
	m := newMsg(typ, `{}`)
	m.Tags = tags
	return m
}

func item(types []string, tags ...string) QueryItem { return QueryItem{Types: types, Tags: tags} }

func cond(after int64, items ...QueryItem) *fsmv1.AppendCondition {
	q := &fsmv1.Query{}
	for _, it := range items {
		q.Items = append(q.Items, &fsmv1.QueryItem{Types: it.Types, Tags: it.Tags})
	}
	return &fsmv1.AppendCondition{FailIfEventsMatch: q, After: after}
}

func conditional(c *fsmv1.Command, ac *fsmv1.AppendCondition) *fsmv1.Command {
	switch k := c.Kind.(type) {
	case *fsmv1.Command_Append:
		k.Append.Condition = ac
	case *fsmv1.Command_AppendMulti:
		k.AppendMulti.Condition = ac
	}
	return c
}

// matches is the model: does m match q? Untagged messages are in no
// index.
func matches(q Query, m Message) bool {
	if len(m.Tags) == 0 {
		return false
	}
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

func TestQuery(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	// gp: 1 Enrolled c1 s1 | 2 Enrolled c1 s2 | 3 Renamed c1 | 4 Enrolled c2 s1 | 5 Left c1 s1 | 6 Untagged
	f.must(appendCmd("ns", "course-c1", tagged("Enrolled", "course:c1", "student:s1"), tagged("Enrolled", "student:s2", "course:c1")))
	f.must(appendCmd("ns", "course-c1", tagged("Renamed", "course:c1")))
	f.must(appendCmd("ns", "course-c2", tagged("Enrolled", "course:c2", "student:s1")))
	f.must(appendCmd("ns", "student-s1", tagged("Left", "course:c1", "student:s1"), newMsg("Untagged", `{}`)))

	cases := []struct {
		name  string
		q     Query
		after int64
		limit int
		want  []int64
	}{
		{"one tag", Query{[]QueryItem{item(nil, "course:c1")}}, 0, 0, []int64{1, 2, 3, 5}},
		{"two tags", Query{[]QueryItem{item(nil, "course:c1", "student:s1")}}, 0, 0, []int64{1, 5}},
		{"type", Query{[]QueryItem{item([]string{"Enrolled"})}}, 0, 0, []int64{1, 2, 4}},
		{"types or'd", Query{[]QueryItem{item([]string{"Renamed", "Left"})}}, 0, 0, []int64{3, 5}},
		{"an untagged message is in no index", Query{[]QueryItem{item([]string{"Untagged"})}}, 0, 0, []int64{}},
		{"type and tag", Query{[]QueryItem{item([]string{"Enrolled"}, "student:s1")}}, 0, 0, []int64{1, 4}},
		{"items or'd", Query{[]QueryItem{item([]string{"Left"}), item(nil, "course:c2")}}, 0, 0, []int64{4, 5}},
		{"overlapping items", Query{[]QueryItem{item(nil, "course:c1"), item(nil, "student:s1")}}, 0, 0, []int64{1, 2, 3, 4, 5}},
		{"after", Query{[]QueryItem{item(nil, "course:c1")}}, 2, 0, []int64{3, 5}},
		{"limit", Query{[]QueryItem{item(nil, "course:c1")}}, 0, 2, []int64{1, 2}},
		{"unknown tag", Query{[]QueryItem{item(nil, "course:c9")}}, 0, 0, []int64{}},
		{"tag of another type", Query{[]QueryItem{item([]string{"Renamed"}, "student:s1")}}, 0, 0, []int64{}},
		{"prefix of a tag is another tag", Query{[]QueryItem{item(nil, "course:c")}}, 0, 0, []int64{}},
		{"repeated names", Query{[]QueryItem{item([]string{"Left", "Left"}, "course:c1", "course:c1")}}, 0, 0, []int64{5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := view(t, s, "ns").Query(tc.q, tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gpsOf(got), tc.want) {
				t.Fatalf("Query = %v, want %v", gpsOf(got), tc.want)
			}
		})
	}

	// Reads return the tags as written.
	msgs := streamOf(t, s, "ns", "course-c1")
	if !reflect.DeepEqual(msgs[1].Tags, []string{"student:s2", "course:c1"}) || msgs[2].Tags[0] != "course:c1" {
		t.Fatalf("stored tags = %q, %q", msgs[1].Tags, msgs[2].Tags)
	}
}

// Removed messages leave their index entries; queries and conditions skip
// them.
func TestQuerySkipsRemovedMessages(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(appendCmd("ns", "a-1", tagged("A", "t"), tagged("B", "t"), tagged("A", "t"))) // 1..3
	f.must(appendCmd("ns", "a-2", tagged("A", "t"), tagged("B", "t")))                   // 4, 5
	f.must(appendCmd("ns", "a-3", tagged("A", "t")))                                     // 6
	f.must(truncateCmd("ns", "a-1", 1))                                                  // removes 1
	f.must(watermarkCmd("ns", "a", []string{"B"}, "a-1", 2))                             // removes 2
	f.must(deleteStreamCmd("ns", "a-2", false))                                          // removes 4, 5
	q := Query{[]QueryItem{item(nil, "t")}}
	got, err := view(t, s, "ns").Query(q, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{3, 6}; !reflect.DeepEqual(gpsOf(got), want) {
		t.Fatalf("Query after removals = %v, want %v", gpsOf(got), want)
	}
	r := f.apply(conditional(appendCmd("ns", "a-9", tagged("A", "t")), cond(3, item(nil, "t"))))[0]
	var cf *ConditionFailedError
	if !errors.As(r.(error), &cf) || cf.GlobalPosition != 6 {
		t.Fatalf("condition after 3 = %v, want the match at 6 (4 and 5 were removed)", r)
	}
	f.must(deleteStreamCmd("ns", "a-3", true))
	if r := f.apply(conditional(appendCmd("ns", "a-9", tagged("A", "t")), cond(3, item(nil, "t"))))[0]; member[*fsmv1.AppendResult](r).FirstGlobalPosition != 7 {
		t.Fatalf("condition with only removed matches = %v, want written at 7", r)
	}
}

// Random tagged logs: every query answers what the model says.
func TestQueryMatchesModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(7))
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	types := []string{"A", "B", "C"}
	tags := []string{"x:1", "x:2", "y:1", "y:2", "z"}
	pick := func(from []string, n int) []string {
		out := slices.Clone(from)
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out[:n]
	}
	for range 300 {
		var msgs []*fsmv1.NewMessage
		for range 1 + rng.Intn(3) {
			msgs = append(msgs, tagged(types[rng.Intn(3)], pick(tags, rng.Intn(4))...))
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
			q.Items = append(q.Items, item(pick(types, rng.Intn(3)), pick(tags, 1+rng.Intn(2))...))
		}
		after := int64(rng.Intn(len(all)))
		want := []int64{}
		for _, m := range all {
			if m.GlobalPosition > after && matches(q, m) {
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

func TestTagValidation(t *testing.T) {
	t.Parallel()
	many := make([]string, MaxMessageTags+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	cases := []struct {
		name  string
		tags  []string
		field string
		desc  string
	}{
		{"too many", many, "messages[0].tags", "must hold at most 32 tags, got 33"},
		{"empty", []string{"a", ""}, "messages[0].tags[1]", "must not be empty"},
		{"too long", []string{strings.Repeat("x", MaxTagBytes+1)}, "messages[0].tags[0]", "must be at most 256 bytes, got 257"},
		{"NUL", []string{"a\x00b"}, "messages[0].tags[0]", "must not contain NUL"},
		{"repeated", []string{"a", "b", "a"}, "messages[0].tags[2]", `repeats messages[0].tags[0] "a"`},
	}
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.apply(appendCmd("ns", "a-1", tagged("T", tc.tags...)))[0]
			var ve *ValidationError
			if !errors.As(r.(error), &ve) || ve.Field != tc.field || ve.Reason != tc.desc {
				t.Fatalf("apply = %v, want invalid %s: %s", r, tc.field, tc.desc)
			}
			// AppendMulti names the message in its stream.
			r = f.apply(multiCmd("ns", streamPart("a-1", nil, tagged("T", tc.tags...))))[0]
			if !errors.As(r.(error), &ve) || ve.Field != "streams[0]."+tc.field {
				t.Fatalf("AppendMulti = %v, want invalid streams[0].%s", r, tc.field)
			}
		})
	}
	if next, _ := view(t, s, "ns").NextGlobalPosition(); next != 1 {
		t.Fatalf("refused appends wrote something: next global position %d", next)
	}
	if r := member[*fsmv1.AppendResult](f.must(appendCmd("ns", "a-1", tagged("T", many[:MaxMessageTags]...)))); r.FirstGlobalPosition != 1 {
		t.Fatalf("32 tags: %+v", r)
	}
}
