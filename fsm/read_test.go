package fsm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// readFixture builds namespace "app":
//
//	gp 1..5   account-1   positions 0..4, types Opened, Deposited x3, Closed
//	gp 6..7   account-2+x positions 0..1 (compound id, cardinal "2")
//	gp 8      account     position 0 (no id: no consumer-group member)
//	gp 9..11  workflow-9  positions 0..2, metadata correlating 9,10 to
//	                      "account-1"; 11 to "other-1"
//	gp 12     account-2   position 0
//	gp 13..   bulk-N      1200 streams of one message each
func readFixture(t testing.TB) *Store {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	f.must(createNS("empty"))
	f.must(appendCmd("app", "account-1", newMsg("Opened", `{"i":0}`), newMsg("Deposited", `{"i":1}`), newMsg("Deposited", `{"i":2}`), newMsg("Deposited", `{"i":3}`), newMsg("Closed", `{"i":4}`)))
	f.must(appendCmd("app", "account-2+x", newMsg("Opened", `{}`), newMsg("Opened", `{}`)))
	f.must(appendCmd("app", "account", newMsg("Opened", `{}`)))
	f.must(appendCmd("app", "workflow-9",
		withMeta(newMsg("Step", `{}`), `{"correlationStreamName":"account-1"}`),
		withMeta(newMsg("Step", `{}`), `{"correlationStreamName":"account"}`),
		withMeta(newMsg("Step", `{}`), `{"correlationStreamName":"other-1"}`)))
	f.must(appendCmd("app", "account-2", newMsg("Opened", `{}`)))
	cmds := make([]*fsmv1.Command, 0, 1200)
	for i := 0; i < 1200; i++ {
		cmds = append(cmds, appendCmd("app", fmt.Sprintf("bulk-%04d", i), newMsg("T", `{}`)))
	}
	f.apply(cmds...)
	return s
}

func gpsOf(msgs []Message) []int64 {
	out := []int64{}
	for _, m := range msgs {
		out = append(out, m.GlobalPosition)
	}
	return out
}

func span(from, to int64) []int64 {
	out := []int64{}
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestReadStream(t *testing.T) {
	t.Parallel()
	s := readFixture(t)
	v := view(t, s, "app")
	cases := []struct {
		name string
		q    StreamQuery
		want []int64 // global positions
	}{
		{"whole stream", StreamQuery{Stream: "account-1"}, span(1, 5)},
		{"from position", StreamQuery{Stream: "account-1", Position: 3}, []int64{4, 5}},
		{"negative position is 0", StreamQuery{Stream: "account-1", Position: -4}, span(1, 5)},
		{"past the end", StreamQuery{Stream: "account-1", Position: 5}, []int64{}},
		{"limit", StreamQuery{Stream: "account-1", Position: 1, Limit: 2}, []int64{2, 3}},
		{"unlimited", StreamQuery{Stream: "account-1", Limit: -1}, span(1, 5)},
		{"global lower bound", StreamQuery{Stream: "account-1", GlobalPosition: 4}, []int64{4, 5}},
		{"both bounds", StreamQuery{Stream: "account-2+x", Position: 1, GlobalPosition: 6}, []int64{7}},
		{"unknown stream", StreamQuery{Stream: "account-3"}, []int64{}},
		{"prefix of another stream is its own stream", StreamQuery{Stream: "account"}, []int64{8}},
		{"compound id is its own stream", StreamQuery{Stream: "account-2"}, []int64{12}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs, err := v.ReadStream(c.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := gpsOf(msgs); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("global positions %v, want %v", got, c.want)
			}
			for i, m := range msgs {
				if m.Stream != c.q.Stream || (i > 0 && m.Position != msgs[i-1].Position+1) {
					t.Fatalf("message %d: %+v", i, m)
				}
			}
		})
	}
}

func TestReadStreamDefaultLimit(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	msgs := make([]*fsmv1.NewMessage, 1000)
	for i := range msgs {
		msgs[i] = newMsg("T", `{}`)
	}
	f.must(appendCmd("app", "big-1", msgs...))
	f.must(appendCmd("app", "big-1", msgs[:500]...))
	v := view(t, s, "app")
	for _, c := range []struct{ limit, want int }{{0, DefaultLimit}, {-1, 1500}, {1200, 1200}, {1, 1}} {
		got, err := v.ReadStream(StreamQuery{Stream: "big-1", Limit: c.limit})
		if err != nil || len(got) != c.want {
			t.Errorf("limit %d: %d messages (%v), want %d", c.limit, len(got), err, c.want)
		}
	}
	if got, _ := v.ReadAll(0, 0); len(got) != DefaultLimit {
		t.Errorf("ReadAll default limit: %d", len(got))
	}
}

func atLeast(gps []int64, from int64) []int64 {
	out := []int64{}
	for _, gp := range gps {
		if gp >= from {
			out = append(out, gp)
		}
	}
	return out
}

func firstN(gps []int64, n int) []int64 { return gps[:min(n, len(gps))] }

func TestReadCategory(t *testing.T) {
	t.Parallel()
	s := readFixture(t)
	v := view(t, s, "app")
	// Consumer-group expectations from the reference md5 rule, not from
	// the code under test.
	member := func(stream string, size int64) int64 {
		id := CardinalID(stream)
		if id == "" {
			return -1
		}
		return referenceMember(id, size)
	}
	accountStreams := map[int64]string{1: "account-1", 2: "account-1", 3: "account-1", 4: "account-1", 5: "account-1", 6: "account-2+x", 7: "account-2+x", 8: "account", 12: "account-2"}
	groupWant := func(m, size int64) []int64 {
		out := []int64{}
		for _, gp := range []int64{1, 2, 3, 4, 5, 6, 7, 8, 12} {
			if member(accountStreams[gp], size) == m {
				out = append(out, gp)
			}
		}
		return out
	}
	cases := []struct {
		name string
		q    CategoryQuery
		want []int64
	}{
		{"whole category", CategoryQuery{Category: "account"}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 12}},
		{"from global position", CategoryQuery{Category: "account", GlobalPosition: 6}, []int64{6, 7, 8, 12}},
		{"global position 0 is 1", CategoryQuery{Category: "account", GlobalPosition: 0}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 12}},
		{"limit", CategoryQuery{Category: "account", GlobalPosition: 5, Limit: 3}, []int64{5, 6, 7}},
		{"unknown category", CategoryQuery{Category: "nope"}, []int64{}},
		{"name with dash matches nothing", CategoryQuery{Category: "account-1"}, []int64{}},
		{"correlation by category", CategoryQuery{Category: "workflow", Correlation: "account"}, []int64{9, 10}},
		{"correlation value with id compares categories", CategoryQuery{Category: "workflow", Correlation: "account-77"}, []int64{9, 10}},
		{"correlation without match", CategoryQuery{Category: "workflow", Correlation: "zzz"}, []int64{}},
		{"correlation drops messages without metadata", CategoryQuery{Category: "account", Correlation: "account"}, []int64{}},
		{"group 0 of 2", CategoryQuery{Category: "account", Member: 0, Size: 2}, groupWant(0, 2)},
		{"group 1 of 2", CategoryQuery{Category: "account", Member: 1, Size: 2}, groupWant(1, 2)},
		{"group 3 of 4", CategoryQuery{Category: "account", Member: 3, Size: 4}, groupWant(3, 4)},
		{"group of 1 takes every stream with an id", CategoryQuery{Category: "account", Member: 0, Size: 1}, []int64{1, 2, 3, 4, 5, 6, 7, 12}},
		{"group fills the page", CategoryQuery{Category: "account", Member: 0, Size: 2, Limit: 2, GlobalPosition: 2}, firstN(atLeast(groupWant(0, 2), 2), 2)},
		{"empty category is the whole namespace", CategoryQuery{Category: "", Limit: 13}, span(1, 13)},
		{"empty category with correlation", CategoryQuery{Category: "", Correlation: "other"}, []int64{11}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs, err := v.ReadCategory(c.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := gpsOf(msgs); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("global positions %v, want %v", got, c.want)
			}
		})
	}
	// Members partition the streams with an id: every such message goes to
	// exactly one member, and compound ids follow their cardinal id.
	if member("account-2+x", 4) != member("account-2", 4) {
		t.Fatal("compound id hashed apart from its cardinal id")
	}
	seen := map[int64]int{}
	for m := int64(0); m < 4; m++ {
		msgs, _ := v.ReadCategory(CategoryQuery{Category: "account", Member: m, Size: 4})
		for _, msg := range msgs {
			seen[msg.GlobalPosition]++
		}
	}
	for _, gp := range []int64{1, 2, 3, 4, 5, 6, 7, 12} {
		if seen[gp] != 1 {
			t.Fatalf("gp %d delivered to %d members", gp, seen[gp])
		}
	}
	if seen[8] != 0 {
		t.Fatal("stream without id delivered to a member")
	}
}

func TestLastMessageAndVersion(t *testing.T) {
	t.Parallel()
	s := readFixture(t)
	v := view(t, s, "app")
	cases := []struct {
		stream, typ string
		wantGP      int64 // 0: none
	}{
		{"account-1", "", 5},
		{"account-1", "Deposited", 4},
		{"account-1", "Opened", 1},
		{"account-1", "Missing", 0},
		{"account-1", "Deposit", 0}, // prefix of a type is not the type
		{"account-3", "", 0},
		{"account", "", 8},
	}
	for _, c := range cases {
		m, ok, err := v.LastMessage(c.stream, c.typ)
		if err != nil {
			t.Fatal(err)
		}
		if (c.wantGP == 0) == ok || (ok && m.GlobalPosition != c.wantGP) {
			t.Errorf("LastMessage(%q, %q) = %d %v, want %d", c.stream, c.typ, m.GlobalPosition, ok, c.wantGP)
		}
	}
	for stream, want := range map[string]int64{"account-1": 4, "account-2+x": 1, "account-3": -1, "": -1} {
		if got, err := v.StreamVersion(stream); err != nil || got != want {
			t.Errorf("StreamVersion(%q) = %d %v, want %d", stream, got, err, want)
		}
	}
}

func TestListStreams(t *testing.T) {
	t.Parallel()
	s := readFixture(t)
	v := view(t, s, "app")
	names := func(infos []StreamInfo) []string {
		out := []string{}
		for _, i := range infos {
			out = append(out, i.Stream)
		}
		return out
	}
	cases := []struct {
		name     string
		q        StreamsQuery
		want     []string
		wantNext string
	}{
		{"prefix", StreamsQuery{Prefix: "account"}, []string{"account", "account-1", "account-2", "account-2+x"}, ""},
		{"prefix with cursor", StreamsQuery{Prefix: "account", Cursor: "account-1"}, []string{"account-2", "account-2+x"}, ""},
		{"limit sets next cursor", StreamsQuery{Prefix: "account", Limit: 2}, []string{"account", "account-1"}, "account-1"},
		{"exact fit has no next", StreamsQuery{Prefix: "account", Limit: 4}, []string{"account", "account-1", "account-2", "account-2+x"}, ""},
		{"cursor before prefix", StreamsQuery{Prefix: "w", Cursor: "a"}, []string{"workflow-9"}, ""},
		{"cursor past prefix", StreamsQuery{Prefix: "account", Cursor: "b"}, []string{}, ""},
		{"no match", StreamsQuery{Prefix: "zzz"}, []string{}, ""},
		{"default page", StreamsQuery{Prefix: "bulk-"}, func() []string {
			out := []string{}
			for i := 0; i < DefaultStreamsPage; i++ {
				out = append(out, fmt.Sprintf("bulk-%04d", i))
			}
			return out
		}(), "bulk-0099"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, next, err := v.ListStreams(c.q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(names(got), c.want) || next != c.wantNext {
				t.Fatalf("got %v next %q, want %v next %q", names(got), next, c.want, c.wantNext)
			}
		})
	}
	got, _, _ := v.ListStreams(StreamsQuery{Prefix: "account-1"})
	if got[0].Version != 4 || got[0].LastActivity != testTime {
		t.Fatalf("stream info %+v", got[0])
	}
	// Paging with the cursor visits every stream exactly once.
	total, cursor := 0, ""
	for {
		page, next, err := v.ListStreams(StreamsQuery{Cursor: cursor, Limit: 333})
		if err != nil {
			t.Fatal(err)
		}
		total += len(page)
		if next == "" {
			break
		}
		cursor = next
	}
	if total != 1205 {
		t.Fatalf("paged through %d streams, want 1205", total)
	}
}

func TestListCategoriesAndStats(t *testing.T) {
	t.Parallel()
	s := readFixture(t)
	v := view(t, s, "app")
	cats, _, err := v.ListCategories(CategoriesQuery{})
	if err != nil {
		t.Fatal(err)
	}
	want := []CategoryInfo{
		{Category: "account", StreamCount: 4, MessageCount: 9},
		{Category: "bulk", StreamCount: 1200, MessageCount: 1200},
		{Category: "workflow", StreamCount: 1, MessageCount: 3},
	}
	if !reflect.DeepEqual(cats, want) {
		t.Fatalf("categories %+v", cats)
	}
	stats, err := v.Stats()
	if err != nil || stats != (NamespaceStats{MessageCount: 1212, StreamCount: 1205, LastActivity: testTime}) {
		t.Fatalf("stats %+v %v", stats, err)
	}
	e := view(t, s, "empty")
	if st, _ := e.Stats(); st != (NamespaceStats{}) {
		t.Fatalf("empty namespace stats %+v", st)
	}
	if c, _, _ := e.ListCategories(CategoriesQuery{}); len(c) != 0 {
		t.Fatalf("empty namespace categories %+v", c)
	}
	if m, _ := e.ReadAll(1, -1); len(m) != 0 {
		t.Fatalf("empty namespace messages %+v", m)
	}
}

func TestViewIsASnapshot(t *testing.T) {
	t.Parallel()
	s := readFixture(t)
	v := view(t, s, "app")
	f := newFeeder(t, s)
	f.must(appendCmd("app", "account-1", newMsg("Late", `{}`)))
	if ver, _ := v.StreamVersion("account-1"); ver != 4 {
		t.Fatalf("view saw a later write: version %d", ver)
	}
	if msgs, _ := v.ReadStream(StreamQuery{Stream: "account-1"}); len(msgs) != 5 {
		t.Fatalf("view saw a later write: %d messages", len(msgs))
	}
	if st, _ := v.Stats(); st.MessageCount != 1212 {
		t.Fatalf("view counters moved: %+v", st)
	}
	if ver, _ := view(t, s, "app").StreamVersion("account-1"); ver != 5 {
		t.Fatalf("new view missed the write: version %d", ver)
	}
}

func TestNamespaceLRU(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil, func(o *Options) { o.MaxOpenNamespaces = 2 })
	f := newFeeder(t, s)
	for i := 0; i < 5; i++ {
		f.must(createNS(fmt.Sprintf("ns%d", i)))
	}
	for round := 0; round < 3; round++ {
		for i := 0; i < 5; i++ {
			f.must(appendCmd(fmt.Sprintf("ns%d", i), "s-1", newMsg("T", `{}`)))
		}
	}
	s.mu.Lock()
	open := s.mu.lru.len
	s.mu.Unlock()
	if open > 2 {
		t.Fatalf("%d namespaces open, cap 2", open)
	}
	for i := 0; i < 5; i++ {
		msgs := streamOf(t, s, fmt.Sprintf("ns%d", i), "s-1")
		pos, gps := positions(msgs)
		if !reflect.DeepEqual(pos, []int64{0, 1, 2}) || !reflect.DeepEqual(gps, []int64{1, 2, 3}) {
			t.Fatalf("ns%d after evictions: positions %v global %v", i, pos, gps)
		}
	}
}

// ListCategories pages: at most MaxCategoriesPage a call, in byte order,
// each page after its cursor, and every category exactly once.
func TestListCategoriesPages(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	cmds := []*fsmv1.Command{createNS("a")}
	const n = MaxCategoriesPage + 205
	for i := range n {
		cmds = append(cmds, appendCmd("a", fmt.Sprintf("c%05d-1", i), newMsg("T", `{}`)))
	}
	s.ApplyBatch(commandEntries(t, 1, cmds...))
	v := view(t, s, "a")
	cases := []struct {
		limit int
		pages []int
	}{
		{0, []int{MaxCategoriesPage, 205}},
		{MaxCategoriesPage + 1, []int{MaxCategoriesPage, 205}}, // capped
		{500, []int{500, 500, 205}},
	}
	for _, tc := range cases {
		var pages []int
		seen, cursor := 0, ""
		for {
			cats, next, err := v.ListCategories(CategoriesQuery{Cursor: cursor, Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range cats {
				if want := fmt.Sprintf("c%05d", seen+i); c.Category != want || c.MessageCount != 1 {
					t.Fatalf("limit %d: category %d = %+v, want %s", tc.limit, seen+i, c, want)
				}
			}
			pages, seen = append(pages, len(cats)), seen+len(cats)
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.Equal(pages, tc.pages) {
			t.Errorf("limit %d: pages of %v, want %v", tc.limit, pages, tc.pages)
		}
	}
}

// Deleted streams spend the scan budget of a stream listing: a page ends
// early (perhaps empty) at the last stream examined, and paging on with
// its cursor still lists every live stream exactly once. A listing whose
// context is done stops with its error.
func TestListStreamsScanBudget(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	var live []string
	for i := range 40 {
		name := fmt.Sprintf("s-%02d", i)
		f.must(appendCmd("app", name, newMsg("T", `{}`)))
		if i%10 == 9 {
			live = append(live, name)
			continue
		}
		f.must(deleteStreamCmd("app", name, false))
	}
	v := view(t, s, "app")
	v.SetScanBudget(5)
	cases := []struct {
		cursor   string
		want     []string
		wantNext string
	}{
		{"", []string{}, "s-04"},           // five deleted streams spend the budget
		{"s-04", []string{"s-09"}, "s-10"}, // s-05..s-08 deleted, s-09 live, s-10 the fifth deleted
		{"s-34", []string{"s-39"}, ""},     // s-35..s-38 deleted: within the budget
		{"s-39", []string{}, ""},           // nothing follows
		{"s-20", []string{}, "s-25"},       // s-21..s-25: five deleted
		{"s-25", []string{"s-29"}, "s-31"}, // s-26..s-28 deleted, s-29 live, s-30 and s-31 deleted
	}
	for _, c := range cases {
		got, next, err := v.ListStreams(StreamsQuery{Cursor: c.cursor})
		names := []string{}
		for _, st := range got {
			names = append(names, st.Stream)
		}
		if err != nil || !reflect.DeepEqual(names, c.want) || next != c.wantNext {
			t.Errorf("after %q: %v next %q, %v; want %v next %q", c.cursor, names, next, err, c.want, c.wantNext)
		}
	}
	var all []string
	for cursor, calls := "", 0; ; calls++ {
		if calls > 20 {
			t.Fatal("paging does not end")
		}
		got, next, err := v.ListStreams(StreamsQuery{Cursor: cursor, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range got {
			all = append(all, st.Stream)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if !reflect.DeepEqual(all, live) {
		t.Fatalf("paged through %v, want %v", all, live)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v.SetScanBudget(0)
	v.SetContext(ctx)
	if _, _, err := v.ListStreams(StreamsQuery{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("listing with a done context: %v, want context.Canceled", err)
	}
}
