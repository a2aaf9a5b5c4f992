package fsm

import (
	"reflect"
	"slices"
	"testing"
)

// reversed returns gps newest first.
func reversed(gps []int64) []int64 {
	out := slices.Clone(gps)
	slices.Reverse(out)
	return out
}

// Backward reads return what the forward read returns, newest first, from
// the given position down; -1 starts at the end, so limit N is the last N.
func TestReadBackward(t *testing.T) {
	t.Parallel()
	s := readFixture(t)
	v := view(t, s, "app")
	last := int64(12 + 1200)
	cases := []struct {
		name string
		read func() ([]Message, error)
		want []int64
	}{
		{"stream from the end", func() ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "account-1", Position: -1, Backward: true})
		}, []int64{5, 4, 3, 2, 1}},
		{"stream last 2", func() ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "account-1", Position: -1, Backward: true, Limit: 2})
		}, []int64{5, 4}},
		{"stream from position 2 down", func() ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "account-1", Position: 2, Backward: true})
		}, []int64{3, 2, 1}},
		{"stream from position 0 down", func() ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "account-1", Position: 0, Backward: true})
		}, []int64{1}},
		{"stream from beyond its end", func() ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "account-1", Position: 99, Backward: true, Limit: 1})
		}, []int64{5}},
		{"stream with a global position floor", func() ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "account-1", Position: -1, Backward: true, GlobalPosition: 4})
		}, []int64{5, 4}},
		{"stream that does not exist", func() ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "nope-1", Position: -1, Backward: true})
		}, []int64{}},
		{"stream with a longer neighbour", func() ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "account-2", Position: -1, Backward: true})
		}, []int64{12}},
		{"category from the end", func() ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "account", GlobalPosition: -1, Backward: true})
		}, []int64{12, 8, 7, 6, 5, 4, 3, 2, 1}},
		{"category last 3", func() ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "account", GlobalPosition: -1, Backward: true, Limit: 3})
		}, []int64{12, 8, 7}},
		{"category from 7 down", func() ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "account", GlobalPosition: 7, Backward: true, Limit: 3})
		}, []int64{7, 6, 5}},
		{"category from 0 reads nothing", func() ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "account", GlobalPosition: 0, Backward: true})
		}, []int64{}},
		{"category with correlation", func() ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "workflow", Correlation: "account", GlobalPosition: -1, Backward: true})
		}, []int64{10, 9}},
		{"category group member", func() ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "account", Member: 0, Size: 1, GlobalPosition: -1, Backward: true})
		}, []int64{12, 7, 6, 5, 4, 3, 2, 1}},
		{"empty category is the namespace", func() ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "", GlobalPosition: -1, Backward: true, Limit: 2})
		}, []int64{last, last - 1}},
		{"all last 3", func() ([]Message, error) { return v.ReadAllBackward(-1, 3) }, []int64{last, last - 1, last - 2}},
		{"all from 3 down", func() ([]Message, error) { return v.ReadAllBackward(3, 0) }, []int64{3, 2, 1}},
		{"all from 0 reads nothing", func() ([]Message, error) { return v.ReadAllBackward(0, 0) }, []int64{}},
		{"all, default limit", func() ([]Message, error) { return v.ReadAllBackward(-1, 0) }, reversed(span(last-DefaultLimit+1, last))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs, err := c.read()
			if err != nil {
				t.Fatal(err)
			}
			if got := gpsOf(msgs); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("global positions %v, want %v", got, c.want)
			}
		})
	}
}

// A backward read obeys the page byte cap like a forward one, and reading
// on below each page's last message returns every message once.
func TestReadBackwardPageBytes(t *testing.T) {
	t.Parallel()
	s, size := pageFixture(t)
	pageGPs := append(span(1, 10), span(12, 21)...)
	reads := []struct {
		name  string
		read  func(v *View, from int64) ([]Message, error)
		next  func(m Message) int64 // -2: nothing below
		want  []int64
		first int64
	}{
		{"ReadStream", func(v *View, from int64) ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "page-1", Position: from, Limit: -1, Backward: true})
		}, func(m Message) int64 { return m.Position - 1 }, reversed(pageGPs), -1},
		{"ReadCategory", func(v *View, from int64) ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "page", GlobalPosition: from, Limit: -1, Backward: true})
		}, func(m Message) int64 { return m.GlobalPosition - 1 }, reversed(pageGPs), -1},
		{"ReadAllBackward", func(v *View, from int64) ([]Message, error) {
			return v.ReadAllBackward(from, -1)
		}, func(m Message) int64 { return m.GlobalPosition - 1 }, reversed(span(1, 21)), -1},
	}
	for _, r := range reads {
		t.Run(r.name, func(t *testing.T) {
			v := view(t, s, "big")
			maxBytes := 3*size + size/2
			v.SetPageBytes(maxBytes)
			var all []Message
			from := r.first
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("no end after 100 pages")
				}
				msgs, err := r.read(v, from)
				if err != nil {
					t.Fatal(err)
				}
				total := 0
				for _, m := range msgs {
					total += m.Size()
				}
				if len(msgs) > 1 && total > maxBytes {
					t.Fatalf("page of %d messages is %d bytes, over the cap %d", len(msgs), total, maxBytes)
				}
				all = append(all, msgs...)
				if !v.PageCapped() {
					break
				}
				from = r.next(msgs[len(msgs)-1])
			}
			if got := gpsOf(all); !reflect.DeepEqual(got, r.want) {
				t.Fatalf("read on: %v, want %v", got, r.want)
			}
		})
	}
}
