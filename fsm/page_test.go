package fsm

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// pageFixture builds namespace "big": stream page-1 with 10 messages of
// 1000-byte data (gp 1..10, type T, tag t:1), one small message of
// another category (gp 11), then 10 more of page-1 (gp 12..21).
func pageFixture(t *testing.T) (*Store, int) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("big"))
	data := `{"x":"` + strings.Repeat("a", 1000-8) + `"}`
	batch := func() []*fsmv1.NewMessage {
		var msgs []*fsmv1.NewMessage
		for range 10 {
			m := newMsg("T", data)
			m.Tags = []string{"t:1"}
			msgs = append(msgs, m)
		}
		return msgs
	}
	f.must(appendCmd("big", "page-1", batch()...))
	f.must(appendCmd("big", "other-1", newMsg("T", `{}`)))
	f.must(appendCmd("big", "page-1", batch()...))
	v := view(t, s, "big")
	msgs, err := v.ReadStream(StreamQuery{Stream: "page-1", Limit: 1})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("read: %v, %v", msgs, err)
	}
	return s, msgs[0].Size()
}

// TestPageBytes checks that SetPageBytes caps every message read: a page
// holds as many whole messages as fit (at least one), says it was capped,
// and reading on after its last message loses and repeats nothing.
func TestPageBytes(t *testing.T) {
	t.Parallel()
	s, size := pageFixture(t)
	if size < 1000+messageOverhead {
		t.Fatalf("Size of a 1000-byte message is %d, want at least %d", size, 1000+messageOverhead)
	}
	pageGPs := append(span(1, 10), span(12, 21)...)
	type read func(v *View, from int64, limit int) ([]Message, error)
	reads := []struct {
		name string
		read read
		next func(m Message) int64
		want []int64
	}{
		{"ReadStream", func(v *View, from int64, limit int) ([]Message, error) {
			return v.ReadStream(StreamQuery{Stream: "page-1", Position: from, Limit: limit})
		}, func(m Message) int64 { return m.Position + 1 }, pageGPs},
		{"ReadCategory", func(v *View, from int64, limit int) ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "page", GlobalPosition: from, Limit: limit})
		}, func(m Message) int64 { return m.GlobalPosition + 1 }, pageGPs},
		{"ReadAll", func(v *View, from int64, limit int) ([]Message, error) {
			return v.ReadAll(from, limit)
		}, func(m Message) int64 { return m.GlobalPosition + 1 }, span(1, 21)},
		{"Query", func(v *View, from int64, limit int) ([]Message, error) {
			return v.Query(Query{Items: []QueryItem{{Tags: []string{"t:1"}}}}, from-1, limit)
		}, func(m Message) int64 { return m.GlobalPosition + 1 }, pageGPs},
	}
	caps := []struct {
		name     string
		maxBytes int
		limit    int
		perPage  int // messages of page-1 in a full page
		capped   bool
	}{
		{"no cap", 0, -1, 20, false},
		{"three fit", 3*size + size/2, -1, 3, true},
		{"exactly three", 3 * size, -1, 3, true},
		{"smaller than one message", 10, -1, 1, true},
		{"limit before the cap", 3 * size, 2, 2, false},
		{"default limit", 5 * size, 0, 5, true},
	}
	for _, r := range reads {
		for _, c := range caps {
			t.Run(r.name+"/"+c.name, func(t *testing.T) {
				v := view(t, s, "big")
				v.SetPageBytes(c.maxBytes)
				first, err := r.read(v, 0, c.limit)
				if err != nil {
					t.Fatal(err)
				}
				if v.PageCapped() != c.capped {
					t.Fatalf("PageCapped = %v, want %v (page of %d)", v.PageCapped(), c.capped, len(first))
				}
				want := c.perPage
				if r.name == "ReadAll" && want == 20 {
					want = 21 // and other-1's message
				}
				if got := len(first); got != want {
					t.Fatalf("first page holds %d messages, want %d", got, want)
				}
				if c.maxBytes > 0 {
					total := 0
					for _, m := range first {
						total += m.Size()
					}
					if len(first) > 1 && total > c.maxBytes {
						t.Fatalf("page of %d messages is %d bytes, over the cap %d", len(first), total, c.maxBytes)
					}
				}
				// Reading on after each page's last message returns
				// every message once, in order.
				var all []Message
				from := int64(0)
				for pages := 0; ; pages++ {
					if pages > 100 {
						t.Fatal("no end after 100 pages")
					}
					msgs, err := r.read(v, from, c.limit)
					if err != nil {
						t.Fatal(err)
					}
					if len(msgs) == 0 {
						break
					}
					all = append(all, msgs...)
					from = r.next(msgs[len(msgs)-1])
				}
				if got := gpsOf(all); !reflect.DeepEqual(got, r.want) {
					t.Fatalf("read on: %v, want %v", got, r.want)
				}
			})
		}
	}
}

// TestPageBytesLargeMessages is the finding's shape: 100 messages of
// about 1 MiB read in one call with limit -1 stay within the cap.
func TestPageBytesLargeMessages(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("big"))
	data := `{"x":"` + strings.Repeat("a", 1<<20-16) + `"}`
	for i := range 100 {
		f.must(appendCmd("big", fmt.Sprintf("blob-%d", i%3), newMsg("T", data)))
	}
	const maxBytes = 3 << 20
	for _, read := range []struct {
		name string
		fn   func(v *View) ([]Message, error)
	}{
		{"ReadAll", func(v *View) ([]Message, error) { return v.ReadAll(1, -1) }},
		{"ReadCategory", func(v *View) ([]Message, error) {
			return v.ReadCategory(CategoryQuery{Category: "blob", Limit: -1})
		}},
		{"ReadStream", func(v *View) ([]Message, error) { return v.ReadStream(StreamQuery{Stream: "blob-0", Limit: -1}) }},
	} {
		t.Run(read.name, func(t *testing.T) {
			v := view(t, s, "big")
			v.SetPageBytes(maxBytes)
			msgs, err := read.fn(v)
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, m := range msgs {
				total += len(m.Data) + len(m.Metadata)
			}
			if len(msgs) != 2 || total > maxBytes || !v.PageCapped() {
				t.Fatalf("page: %d messages, %d bytes of data, capped %v; want 2 messages within %d bytes, capped", len(msgs), total, v.PageCapped(), maxBytes)
			}
		})
	}
}
