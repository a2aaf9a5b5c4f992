package fsm

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// ReadPositions returns, page after page, exactly the positions of the
// messages the matching read returns, under a page byte cap too, and
// decodes no message: DecodedBytes stays 0 while the read of messages
// decodes every payload.
func TestReadPositionsMatchesReads(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	data := `{"x":"` + strings.Repeat("a", 4<<10) + `"}`
	for i := range 40 {
		f.must(appendCmd("ns", fmt.Sprintf("acct-%d", i%7), newMsg("T", data)))
		if i%3 == 0 {
			f.must(appendCmd("ns", "other-1", newMsg("T", data)))
		}
	}
	for _, tc := range []struct {
		name  string
		q     PositionsQuery
		read  func(v *View, from int64) ([]Message, error)
		after func(m Message) int64
	}{
		{"stream", PositionsQuery{Stream: "acct-3", From: 1},
			func(v *View, from int64) ([]Message, error) {
				return v.ReadStream(StreamQuery{Stream: "acct-3", Position: from, Limit: -1})
			}, func(m Message) int64 { return m.Position + 1 }},
		{"category", PositionsQuery{Category: "acct", From: 5},
			func(v *View, from int64) ([]Message, error) {
				return v.ReadCategory(CategoryQuery{Category: "acct", GlobalPosition: from, Limit: -1})
			}, func(m Message) int64 { return m.GlobalPosition + 1 }},
		{"category, consumer group member", PositionsQuery{Category: "acct", From: 1, Member: 1, Size: 3},
			func(v *View, from int64) ([]Message, error) {
				return v.ReadCategory(CategoryQuery{Category: "acct", GlobalPosition: from, Limit: -1, Member: 1, Size: 3})
			}, func(m Message) int64 { return m.GlobalPosition + 1 }},
		{"namespace", PositionsQuery{From: 2},
			func(v *View, from int64) ([]Message, error) { return v.ReadAll(from, -1) },
			func(m Message) int64 { return m.GlobalPosition + 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := view(t, s, "ns")
			msgs, err := tc.read(v, tc.q.From)
			if err != nil || len(msgs) == 0 {
				t.Fatalf("read: %d messages, %v", len(msgs), err)
			}
			if v.DecodedBytes() < int64(len(msgs)*len(data)) {
				t.Fatalf("the read of %d messages decoded %d bytes", len(msgs), v.DecodedBytes())
			}
			var want []Position
			for _, m := range msgs {
				want = append(want, Position{Stream: m.Stream, Position: m.Position, GlobalPosition: m.GlobalPosition})
			}
			for _, pageCap := range []int{0, 100} {
				var got []Position
				pages := 0
				pv := view(t, s, "ns")
				pv.SetPageBytes(pageCap)
				for q := tc.q; ; pages++ {
					page, err := pv.ReadPositions(q)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, page...)
					if !pv.PageCapped() {
						break
					}
					if len(page) == 0 || pages > len(want) {
						t.Fatalf("cap %d: page %d of %d positions, capped", pageCap, pages, len(page))
					}
					if tc.q.Stream != "" {
						q.From = page[len(page)-1].Position + 1
					} else {
						q.From = page[len(page)-1].GlobalPosition + 1
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("cap %d: positions %v, want %v", pageCap, got, want)
				}
				if pageCap > 0 && pages < 2 {
					t.Fatalf("cap %d: %d positions in one page", pageCap, len(got))
				}
				if n := pv.DecodedBytes(); n != 0 {
					t.Fatalf("cap %d: reading positions decoded %d bytes of messages", pageCap, n)
				}
			}
		})
	}
}
