package fsm

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// deletionFixture: account-1 holds positions 0..4 (types A,B,A,B,A), gps
// 1..5; account-2 holds 0..2, gps 6..8; other-1 holds 0..1, gps 9..10.
func deletionFixture(t *testing.T) (*Store, *feeder) {
	t.Helper()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	for i := range 5 {
		f.must(appendCmd("ns", "account-1", newMsg([]string{"A", "B"}[i%2], `{}`)))
	}
	f.must(appendCmd("ns", "account-2", newMsg("A", `{}`), newMsg("A", `{}`), newMsg("A", `{}`)))
	f.must(appendCmd("ns", "other-1", newMsg("A", `{}`), newMsg("A", `{}`)))
	return s, f
}

func deletion(t *testing.T, r any) *fsmv1.StreamDeletionResult {
	t.Helper()
	d, ok := memberOK[*fsmv1.StreamDeletionResult](r)
	if !ok {
		t.Fatalf("result %T %v, want a StreamDeletionResult", r, r)
	}
	return d
}

func TestTruncateStream(t *testing.T) {
	t.Parallel()
	s, f := deletionFixture(t)
	d := deletion(t, f.must(truncateCmd("ns", "account-1", 2)))
	if d.MessagesDeleted != 2 || d.Version != 4 {
		t.Fatalf("truncate removed %d, version %d; want 2 and 4", d.MessagesDeleted, d.Version)
	}
	v := view(t, s, "ns")
	pos, gps := positions(streamOf(t, s, "ns", "account-1"))
	if !slices.Equal(pos, []int64{2, 3, 4}) || !slices.Equal(gps, []int64{3, 4, 5}) {
		t.Fatalf("account-1 reads positions %v gps %v, want [2 3 4] [3 4 5]", pos, gps)
	}
	cat, err := v.ReadCategory(CategoryQuery{Category: "account", Limit: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := gpsOf(cat); !slices.Equal(got, []int64{3, 4, 5, 6, 7, 8}) {
		t.Fatalf("category account reads gps %v, want [3 4 5 6 7 8]", got)
	}
	all, err := v.ReadAll(1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if got := gpsOf(all); !slices.Equal(got, []int64{3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("$all reads gps %v, want [3..10]", got)
	}
	st, err := v.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.MessageCount != 8 || st.StreamCount != 3 {
		t.Fatalf("stats %+v, want 8 messages in 3 streams", st)
	}
	// The last B (position 3) survives; truncating before 4 removes it and
	// the type index forgets it.
	deletion(t, f.must(truncateCmd("ns", "account-1", 4)))
	if _, ok, err := view(t, s, "ns").LastMessage("account-1", "B"); err != nil || ok {
		t.Fatalf("LastMessage of type B after its removal: found %v, err %v", ok, err)
	}
	// Truncating what is already gone removes nothing and is not an error.
	if d := deletion(t, f.must(truncateCmd("ns", "account-1", 3))); d.MessagesDeleted != 0 {
		t.Fatalf("a second truncate removed %d", d.MessagesDeleted)
	}
	// The next write takes the next position and global position.
	r := member[*fsmv1.AppendResult](f.must(appendCmd("ns", "account-1", newMsg("A", `{}`))))
	if r.FirstPosition != 5 || r.FirstGlobalPosition != 11 {
		t.Fatalf("append after truncate at position %d gp %d, want 5 and 11", r.FirstPosition, r.FirstGlobalPosition)
	}
}

func TestDeleteStream(t *testing.T) {
	t.Parallel()
	t.Run("soft", func(t *testing.T) {
		s, f := deletionFixture(t)
		d := deletion(t, f.must(deleteStreamCmd("ns", "account-2", false)))
		if d.MessagesDeleted != 3 || d.Version != 2 {
			t.Fatalf("delete removed %d, version %d; want 3 and 2", d.MessagesDeleted, d.Version)
		}
		v := view(t, s, "ns")
		if msgs := streamOf(t, s, "ns", "account-2"); len(msgs) != 0 {
			t.Fatalf("a deleted stream reads %d messages", len(msgs))
		}
		if ver, _ := v.StreamVersion("account-2"); ver != 2 {
			t.Fatalf("version after a soft delete %d, want 2 (kept)", ver)
		}
		if _, ok, err := v.LastMessage("account-2", ""); ok || err != nil {
			t.Fatalf("LastMessage of a deleted stream: found %v, err %v", ok, err)
		}
		streams, _, err := v.ListStreams(StreamsQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, si := range streams {
			names = append(names, si.Stream)
		}
		if !slices.Equal(names, []string{"account-1", "other-1"}) {
			t.Fatalf("streams listed %v, want [account-1 other-1]", names)
		}
		cats, _, err := v.ListCategories(CategoriesQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if cats[0].Category != "account" || cats[0].StreamCount != 1 || cats[0].MessageCount != 5 {
			t.Fatalf("category account counts %+v, want 1 stream, 5 messages", cats[0])
		}
		r := member[*fsmv1.AppendResult](f.must(appendCmd("ns", "account-2", newMsg("A", `{}`))))
		if r.FirstPosition != 3 {
			t.Fatalf("append after a soft delete at position %d, want 3", r.FirstPosition)
		}
		if st, _ := view(t, s, "ns").Stats(); st.StreamCount != 3 || st.MessageCount != 8 {
			t.Fatalf("stats after writing the deleted stream again %+v, want 3 streams, 8 messages", st)
		}
	})
	t.Run("hard", func(t *testing.T) {
		s, f := deletionFixture(t)
		deletion(t, f.must(deleteStreamCmd("ns", "account-2", true)))
		for _, c := range []*fsmv1.Command{appendCmd("ns", "account-2", newMsg("A", `{}`)), truncateCmd("ns", "account-2", 0)} {
			if err, _ := f.apply(c)[0].(error); !errors.Is(err, ErrStreamDeleted) {
				t.Fatalf("%v on a hard-deleted stream: %v, want ErrStreamDeleted", c, err)
			}
		}
		if d := deletion(t, f.must(deleteStreamCmd("ns", "account-2", false))); d.MessagesDeleted != 0 || d.Version != 2 {
			t.Fatalf("deleting a tombstone again: %+v", d)
		}
		if ver, _ := view(t, s, "ns").StreamVersion("account-2"); ver != 2 {
			t.Fatalf("version of a tombstone %d, want 2", ver)
		}
	})
}

func TestStreamDeletionRefusals(t *testing.T) {
	t.Parallel()
	expect := func(v int64) *fsmv1.Command {
		c := deleteStreamCmd("ns", "account-1", false)
		c.GetDeleteStream().ExpectedVersion = &v
		return c
	}
	cases := []struct {
		name string
		cmd  *fsmv1.Command
		want func(error) bool
	}{
		{"truncate beyond the version", truncateCmd("ns", "account-1", 6), isInvalid("before")},
		{"truncate with a negative position", truncateCmd("ns", "account-1", -1), isInvalid("before")},
		{"truncate of a stream that never had a message", truncateCmd("ns", "account-9", 0), is(ErrStreamNotFound)},
		{"delete of a stream that never had a message", deleteStreamCmd("ns", "account-9", false), is(ErrStreamNotFound)},
		{"delete with the wrong expected version", expect(3), func(err error) bool {
			var vc *VersionConflictError
			return errors.As(err, &vc) && vc.Actual == 4 && vc.Expected == 3
		}},
		{"bad stream name", truncateCmd("ns", "", 0), isInvalid("stream")},
		{"unknown namespace", truncateCmd("nope", "account-1", 0), is(ErrNamespaceNotFound)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, f := deletionFixture(t)
			before := contentHash(t, s)
			err, _ := f.apply(tc.cmd)[0].(error)
			if !tc.want(err) {
				t.Fatalf("got %v", err)
			}
			// A refused entry writes nothing, not even its A record.
			if after := contentHash(t, s); after != before {
				t.Fatal("a refused command changed the stored state")
			}
		})
	}
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func isInvalid(field string) func(error) bool {
	return func(err error) bool {
		var ve *ValidationError
		return errors.As(err, &ve) && ve.Field == field
	}
}

func TestImportRefusesDeletedPositions(t *testing.T) {
	t.Parallel()
	_, f := deletionFixture(t)
	f.must(truncateCmd("ns", "account-1", 3))
	f.must(deleteStreamCmd("ns", "account-2", true))
	cases := []struct {
		name string
		rec  *fsmv1.ImportedMessage
		ok   bool
	}{
		{"a truncated position", rec("account-1", 1, 100, "A"), false},
		{"a position after the version", rec("account-1", 5, 101, "A"), true},
		{"a hard-deleted stream", rec("account-2", 7, 102, "A"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err, _ := f.apply(importCmd("ns", false, tc.rec))[0].(error)
			if (err == nil) != tc.ok {
				t.Fatalf("import %v: %v", tc.rec, err)
			}
			if !tc.ok && !errors.Is(err, ErrPositionExists) {
				t.Fatalf("import %v: %v, want ErrPositionExists", tc.rec, err)
			}
		})
	}
}

// TestStreamDeletionDeterministic applies one log with deletes and
// truncates in different ApplyBatch splits: every split must end in the
// same state (replicas batch differently).
func TestStreamDeletionDeterministic(t *testing.T) {
	t.Parallel()
	var cmds []*fsmv1.Command
	cmds = append(cmds, createNS("ns"))
	for i := range 60 {
		stream := fmt.Sprintf("account-%d", i%4)
		switch i % 10 {
		case 7:
			cmds = append(cmds, truncateCmd("ns", stream, int64(i/8)))
		case 9:
			cmds = append(cmds, deleteStreamCmd("ns", stream, i == 39))
		default:
			cmds = append(cmds, appendCmd("ns", stream, newMsg("A", `{}`), newMsg("B", `{}`)))
		}
	}
	logs := commandEntries(t, 1, cmds...)
	var want string
	for _, split := range []int{1, 3, 7, len(logs)} {
		s := openTestStore(t, nil)
		for i := 0; i < len(logs); i += split {
			s.ApplyBatch(logs[i:min(i+split, len(logs))])
		}
		got := contentHash(t, s)
		if want == "" {
			want = got
		} else if got != want {
			t.Fatalf("batches of %d end in another state than batches of 1", split)
		}
	}
}

func watermarkCmd(ns, category string, types []string, marks ...any) *fsmv1.Command {
	c := &fsmv1.DeleteByWatermark{Namespace: ns, Category: category, Types: types}
	for i := 0; i < len(marks); i += 2 {
		c.Watermarks = append(c.Watermarks, &fsmv1.StreamWatermark{Stream: marks[i].(string), Position: int64(marks[i+1].(int))})
	}
	return &fsmv1.Command{Kind: &fsmv1.Command_DeleteByWatermark{DeleteByWatermark: c}}
}

func TestDeleteByWatermark(t *testing.T) {
	t.Parallel()
	t.Run("every type", func(t *testing.T) {
		s, f := deletionFixture(t)
		r := member[*fsmv1.WatermarkDeletionResult](f.must(watermarkCmd("ns", "account", nil, "account-1", 1, "account-2", 9, "account-7", 3)))
		if r.MessagesDeleted != 5 || r.Streams != 2 {
			t.Fatalf("removed %d in %d streams, want 5 in 2 (2 of account-1, all 3 of account-2)", r.MessagesDeleted, r.Streams)
		}
		pos, _ := positions(streamOf(t, s, "ns", "account-1"))
		if !slices.Equal(pos, []int64{2, 3, 4}) {
			t.Fatalf("account-1 keeps positions %v, want [2 3 4]", pos)
		}
		if st, _ := view(t, s, "ns").Stats(); st.MessageCount != 5 || st.StreamCount != 2 {
			t.Fatalf("stats %+v, want 5 messages in 2 streams", st)
		}
	})
	t.Run("given types", func(t *testing.T) {
		s, f := deletionFixture(t)
		// account-1 is A,B,A,B,A at 0..4: remove the Bs up to 3.
		r := member[*fsmv1.WatermarkDeletionResult](f.must(watermarkCmd("ns", "account", []string{"B"}, "account-1", 3)))
		if r.MessagesDeleted != 2 || r.Streams != 1 {
			t.Fatalf("removed %d in %d streams, want 2 in 1", r.MessagesDeleted, r.Streams)
		}
		pos, _ := positions(streamOf(t, s, "ns", "account-1"))
		if !slices.Equal(pos, []int64{0, 2, 4}) {
			t.Fatalf("account-1 keeps positions %v, want [0 2 4]", pos)
		}
		v := view(t, s, "ns")
		if _, ok, err := v.LastMessage("account-1", "B"); ok || err != nil {
			t.Fatalf("LastMessage of type B after removing every B: found %v, err %v", ok, err)
		}
		// The last message (position 4, an A) survives; remove it by type
		// and LastMessage falls back to the last one left.
		f.must(watermarkCmd("ns", "account", []string{"A"}, "account-1", 4))
		f.must(appendCmd("ns", "account-1", newMsg("B", `{}`)))
		f.must(watermarkCmd("ns", "account", []string{"B"}, "account-1", 5))
		if m, ok, err := view(t, s, "ns").LastMessage("account-1", ""); ok || err != nil {
			t.Fatalf("LastMessage of an emptied stream: %+v found %v, err %v", m, ok, err)
		}
		f.must(appendCmd("ns", "account-1", newMsg("A", `{}`), newMsg("B", `{}`)))
		f.must(watermarkCmd("ns", "account", []string{"B"}, "account-1", 7))
		m, ok, err := view(t, s, "ns").LastMessage("account-1", "")
		if err != nil || !ok || m.Position != 6 {
			t.Fatalf("LastMessage after its last message was removed: position %d found %v, err %v; want 6", m.Position, ok, err)
		}
	})
	cases := []struct {
		name string
		cmd  *fsmv1.Command
		want func(error) bool
	}{
		{"no streams", watermarkCmd("ns", "account", nil), isInvalid("watermarks")},
		{"a stream of another category", watermarkCmd("ns", "account", nil, "other-1", 0), isInvalid("watermarks[0].stream")},
		{"a stream named twice", watermarkCmd("ns", "account", nil, "account-1", 0, "account-1", 1), isInvalid("watermarks[1].stream")},
		{"streams out of order", watermarkCmd("ns", "account", nil, "account-2", 0, "account-1", 1), isInvalid("watermarks[1].stream")},
		{"a negative position", watermarkCmd("ns", "account", nil, "account-1", -1), isInvalid("watermarks[0].position")},
		{"a stream name as the category", watermarkCmd("ns", "account-1", nil, "account-1", 0), isInvalid("category")},
		{"an empty type", watermarkCmd("ns", "account", []string{""}, "account-1", 0), isInvalid("types[0]")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, f := deletionFixture(t)
			before := contentHash(t, s)
			if err, _ := f.apply(tc.cmd)[0].(error); !tc.want(err) {
				t.Fatalf("got %v", err)
			}
			if contentHash(t, s) != before {
				t.Fatal("a refused watermark deletion changed the stored state")
			}
		})
	}
}

// TestRetryOfDeletedMessages: an id the namespace remembers whose message
// was deleted since still answers a retry with the original positions
// (exactly once, even across a delete), including a retry whose append was
// only partly removed; the same id for another stream is refused.
func TestRetryOfDeletedMessages(t *testing.T) {
	t.Parallel()
	s, f := deletionFixture(t)
	clientMsg := func(typ, data string) *fsmv1.NewMessage {
		m := newMsg(typ, data)
		m.ClientId = true
		return m
	}
	one := clientMsg("A", `{"k":1}`)
	first := member[*fsmv1.AppendResult](f.must(appendCmd("ns", "pay-1", one)))
	two := []*fsmv1.NewMessage{clientMsg("A", `{"k":2}`), clientMsg("B", `{"k":3}`)}
	pair := member[*fsmv1.AppendResult](f.must(appendCmd("ns", "pay-1", two...)))
	// Remove the first append and the first message of the second.
	f.must(truncateCmd("ns", "pay-1", pair.FirstPosition+1))

	again := member[*fsmv1.AppendResult](f.must(appendCmd("ns", "pay-1", one)))
	if !again.Duplicate || again.FirstPosition != first.FirstPosition || again.FirstGlobalPosition != first.FirstGlobalPosition {
		t.Fatalf("retry of a deleted append: %+v, want a duplicate at position %d", again, first.FirstPosition)
	}
	again = member[*fsmv1.AppendResult](f.must(appendCmd("ns", "pay-1", two...)))
	if !again.Duplicate || again.FirstPosition != pair.FirstPosition || again.LastPosition != pair.LastPosition {
		t.Fatalf("retry of a partly deleted append: %+v, want a duplicate at %d..%d", again, pair.FirstPosition, pair.LastPosition)
	}
	if err, _ := f.apply(appendCmd("ns", "other-9", one))[0].(error); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("the deleted message's id on another stream: %v, want ErrDuplicateID", err)
	}
	if msgs := streamOf(t, s, "ns", "pay-1"); len(msgs) != 1 || msgs[0].Position != pair.LastPosition {
		t.Fatalf("pay-1 holds %d messages after the retries, want only position %d", len(msgs), pair.LastPosition)
	}
	if _, ok, err := view(t, s, "ns").LookupID(one.Id); ok || err != nil {
		t.Fatalf("LookupID of a deleted message's id: found %v, err %v", ok, err)
	}
}
