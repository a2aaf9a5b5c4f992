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

// ReadAllQuery and ReadCategory with a Filter return what filtering the
// unfiltered read returns, in a namespace whose type index is complete
// (the index path for types) and in a legacy one (the scan), forward and
// backward, with removed messages, limits and start positions.
func TestReadFiltered(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(3))
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNSAllTypes("full"))
	f.must(createNS("legacy"))
	types := []string{"A", "B", "C"}
	streams := []string{"acct-1", "acct-2", "acct-12", "order-1", "order-2", "ord-9"}
	for range 200 {
		m := newMsg(types[rng.Intn(3)], `{}`)
		if rng.Intn(4) == 0 {
			m = tagged(m.Type, "t")
		}
		st := streams[rng.Intn(len(streams))]
		f.must(appendCmd("full", st, m))
		f.must(appendCmd("legacy", st, m))
	}
	for _, ns := range []string{"full", "legacy"} {
		f.must(truncateCmd(ns, "acct-1", 3)) // removed messages leave index entries
	}
	if ok, _ := view(t, s, "full").TypeIndexComplete(); !ok {
		t.Fatal("full: type index not complete")
	}
	if ok, _ := view(t, s, "legacy").TypeIndexComplete(); ok {
		t.Fatal("legacy: type index complete")
	}
	filters := []Filter{
		{Types: []string{"A"}},
		{Types: []string{"A", "C"}},
		{Types: []string{"Nope"}},
		{StreamPrefix: "acct-1"},
		{StreamPrefix: "ord"},
		{Types: []string{"B"}, StreamPrefix: "order-"},
		{},
	}
	for _, ns := range []string{"full", "legacy"} {
		everything, err := view(t, s, ns).ReadAll(1, -1)
		if err != nil {
			t.Fatal(err)
		}
		model := func(f Filter, keep func(Message) bool, from int64, backward bool, limit int) []int64 {
			out := []int64{}
			msgs := slices.Clone(everything)
			if backward {
				slices.Reverse(msgs)
			}
			for _, m := range msgs {
				if (backward && from >= 0 && m.GlobalPosition > from) || (!backward && m.GlobalPosition < from) {
					continue
				}
				if f.keeps(&m) && keep(m) && len(out) < limit {
					out = append(out, m.GlobalPosition)
				}
			}
			return out
		}
		all := func(Message) bool { return true }
		inOrder := func(m Message) bool { return strings.HasPrefix(m.Stream, "order-") }
		for _, flt := range filters {
			for _, c := range []struct {
				from     int64
				backward bool
				limit    int
			}{{1, false, 1000}, {57, false, 1000}, {1, false, 7}, {-1, true, 1000}, {120, true, 5}} {
				name := fmt.Sprintf("%s/%+v/from %d backward %v limit %d", ns, flt, c.from, c.backward, c.limit)
				got, err := view(t, s, ns).ReadAllQuery(AllQuery{GlobalPosition: c.from, Limit: c.limit, Backward: c.backward, Filter: flt})
				if err != nil {
					t.Fatal(err)
				}
				if want := model(flt, all, c.from, c.backward, c.limit); !reflect.DeepEqual(gpsOf(got), want) {
					t.Fatalf("%s: ReadAllQuery = %v, want %v", name, gpsOf(got), want)
				}
				got, err = view(t, s, ns).ReadCategory(CategoryQuery{Category: "order", GlobalPosition: c.from, Limit: c.limit, Backward: c.backward, Filter: flt})
				if err != nil {
					t.Fatal(err)
				}
				if want := model(flt, inOrder, c.from, c.backward, c.limit); !reflect.DeepEqual(gpsOf(got), want) {
					t.Fatalf("%s: ReadCategory order = %v, want %v", name, gpsOf(got), want)
				}
				got, err = view(t, s, ns).ReadCategory(CategoryQuery{Category: "", GlobalPosition: c.from, Limit: c.limit, Backward: c.backward, Filter: flt})
				if err != nil {
					t.Fatal(err)
				}
				if want := model(flt, all, c.from, c.backward, c.limit); !reflect.DeepEqual(gpsOf(got), want) {
					t.Fatalf("%s: ReadCategory \"\" = %v, want %v", name, gpsOf(got), want)
				}
			}
		}
	}
}

// A filtered read obeys the page byte cap: reading on after each page's
// last message returns every match once (the index path and the scan).
func TestReadFilteredPageBytes(t *testing.T) {
	t.Parallel()
	s, size := pageFixture(t) // legacy: page-1 gp 1..10, 12..21 (type T), other-1 gp 11
	f := newFeeder(t, s)
	f.must(createNSAllTypes("bigfull"))
	data := `{"x":"` + strings.Repeat("a", 1000-8) + `"}`
	var msgs []*fsmv1.NewMessage
	for range 10 {
		msgs = append(msgs, newMsg("T", data))
	}
	f.must(appendCmd("bigfull", "page-1", msgs...))
	f.must(appendCmd("bigfull", "other-1", newMsg("U", `{}`)))
	f.must(appendCmd("bigfull", "page-1", msgs...))
	for _, tc := range []struct {
		ns   string
		flt  Filter
		want []int64
	}{
		{"big", Filter{Types: []string{"T"}, StreamPrefix: "page-"}, append(span(1, 10), span(12, 21)...)},
		{"bigfull", Filter{Types: []string{"T"}}, append(span(1, 10), span(12, 21)...)},
	} {
		t.Run(tc.ns, func(t *testing.T) {
			v := view(t, s, tc.ns)
			v.SetPageBytes(3*size + size/2)
			var got []Message
			for from, pages := int64(1), 0; ; pages++ {
				if pages > 100 {
					t.Fatal("no end after 100 pages")
				}
				page, err := v.ReadAllQuery(AllQuery{GlobalPosition: from, Limit: -1, Filter: tc.flt})
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > 3 {
					t.Fatalf("page of %d messages over a cap of three", len(page))
				}
				got = append(got, page...)
				if !v.PageCapped() {
					break
				}
				from = page[len(page)-1].GlobalPosition + 1
			}
			if !reflect.DeepEqual(gpsOf(got), tc.want) {
				t.Fatalf("read on: %v, want %v", gpsOf(got), tc.want)
			}
		})
	}
}

func TestValidateFilter(t *testing.T) {
	t.Parallel()
	many := make([]string, MaxQueryItemTypes+1)
	for i := range many {
		many[i] = fmt.Sprintf("T%d", i)
	}
	for _, tc := range []struct {
		f     Filter
		field string // "" valid
	}{
		{Filter{}, ""},
		{Filter{Types: []string{"A"}, StreamPrefix: "acct-"}, ""},
		{Filter{Types: many}, "types"},
		{Filter{Types: []string{"A", ""}}, "types[1]"},
		{Filter{StreamPrefix: "a\x00"}, "stream_prefix"},
		{Filter{StreamPrefix: strings.Repeat("s", MaxStreamName+1)}, "stream_prefix"},
	} {
		err := ValidateFilter("", tc.f)
		var ve *ValidationError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tc.f, err)
		case tc.field != "" && (!errors.As(err, &ve) || ve.Field != tc.field):
			t.Errorf("%+v: %v, want a validation error on %s", tc.f, err, tc.field)
		}
	}
}
