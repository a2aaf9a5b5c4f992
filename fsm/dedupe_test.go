package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// clientMsg is a message whose id the client gave (dedupe applies).
func clientMsg(id, typ, data string) *fsmv1.NewMessage {
	return &fsmv1.NewMessage{Id: id, Type: typ, Data: []byte(data), ClientId: true}
}

func uid(n int) string { return fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", n) }

func appendAt(ns, stream string, at time.Duration, msgs ...*fsmv1.NewMessage) *fsmv1.Command {
	c := appendCmd(ns, stream, msgs...)
	c.GetAppend().TimeUnixNano = testTime + int64(at)
	return c
}

func createNSWindow(name string, window int64) *fsmv1.Command {
	c := createNS(name)
	c.GetCreateNamespace().DedupeWindowNanos = window
	return c
}

// snapshotOf is every message of a namespace, to assert that a refused
// call changed nothing.
func snapshotOf(t *testing.T, s *Store, ns string) []Message {
	t.Helper()
	msgs, err := view(t, s, ns).ReadAll(1, -1)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func TestIdempotentAppend(t *testing.T) {
	t.Parallel()
	a, b := uid(1), uid(2)
	orig := func() *fsmv1.Command {
		return appendAt("app", "acct-1", 0, clientMsg(a, "Opened", `{"x":1}`), clientMsg(b, "Moved", `{"x":2}`))
	}
	retry := &fsmv1.AppendResult{Namespace: "app", Stream: "acct-1", FirstPosition: 1, LastPosition: 2, FirstGlobalPosition: 2, LastGlobalPosition: 3, Duplicate: true}
	cases := []struct {
		name string
		cmd  *fsmv1.Command
		want any // *fsmv1.AppendResult (Index filled in by the test) or error
		// msg is the exact error text.
		msg string
	}{
		{name: "exact retry", cmd: orig(), want: retry},
		{name: "retry with a stale expected version", cmd: func() *fsmv1.Command {
			c := orig()
			c.GetAppend().ExpectedVersion = proto.Int64(0) // was right for the original
			return c
		}(), want: retry},
		{name: "retry of one message of the append", cmd: appendAt("app", "acct-1", 0, clientMsg(b, "Moved", `{"x":2}`)),
			want: &fsmv1.AppendResult{Namespace: "app", Stream: "acct-1", FirstPosition: 2, LastPosition: 2, FirstGlobalPosition: 3, LastGlobalPosition: 3, Duplicate: true}},
		{name: "retry at a later entry time within the window", cmd: func() *fsmv1.Command {
			c := orig()
			c.GetAppend().TimeUnixNano += int64(time.Minute)
			return c
		}(), want: retry},
		{name: "other data", cmd: appendAt("app", "acct-1", 0, clientMsg(a, "Opened", `{"x":9}`), clientMsg(b, "Moved", `{"x":2}`)),
			want: &DuplicateIDError{Message: 0, ID: a, Stream: "acct-1", Position: 1, GlobalPosition: 2, Reason: DuplicateContent},
			msg:  `fsm: messages[0].id ` + a + ` was already written to stream "acct-1" at position 1 (global position 2) with a different stream, type or data`},
		{name: "other type", cmd: appendAt("app", "acct-1", 0, clientMsg(a, "Opened", `{"x":1}`), clientMsg(b, "Closed", `{"x":2}`)),
			want: &DuplicateIDError{Message: 1, ID: b, Stream: "acct-1", Position: 2, GlobalPosition: 3, Reason: DuplicateContent}},
		{name: "other stream", cmd: appendAt("app", "acct-2", 0, clientMsg(a, "Opened", `{"x":1}`)),
			want: &DuplicateIDError{Message: 0, ID: a, Stream: "acct-1", Position: 1, GlobalPosition: 2, Reason: DuplicateContent}},
		{name: "remembered then new", cmd: appendAt("app", "acct-1", 0, clientMsg(a, "Opened", `{"x":1}`), clientMsg(uid(3), "Moved", `{}`)),
			want: &DuplicateIDError{Message: 0, ID: a, Stream: "acct-1", Position: 1, GlobalPosition: 2, Reason: DuplicateMixed},
			msg:  `fsm: messages[0].id ` + a + ` was already written to stream "acct-1" at position 1 (global position 2) but the append is not that write again: a retry must resend the original append, and new messages need new ids`},
		{name: "new then remembered", cmd: appendAt("app", "acct-1", 0, clientMsg(uid(3), "Moved", `{}`), clientMsg(a, "Opened", `{"x":1}`)),
			want: &DuplicateIDError{Message: 1, ID: a, Stream: "acct-1", Position: 1, GlobalPosition: 2, Reason: DuplicateMixed}},
		{name: "generated id then remembered", cmd: appendAt("app", "acct-1", 0, newMsg("Moved", `{}`), clientMsg(a, "Opened", `{"x":1}`)),
			want: &DuplicateIDError{Message: 1, ID: a, Stream: "acct-1", Position: 1, GlobalPosition: 2, Reason: DuplicateMixed}},
		{name: "reordered", cmd: appendAt("app", "acct-1", 0, clientMsg(b, "Moved", `{"x":2}`), clientMsg(a, "Opened", `{"x":1}`)),
			want: &DuplicateIDError{Message: 1, ID: a, Stream: "acct-1", Position: 1, GlobalPosition: 2, Reason: DuplicateMixed}},
		{name: "id twice in one append", cmd: appendAt("app", "acct-1", 0, clientMsg(uid(4), "T", `{}`), clientMsg(uid(4), "T", `{}`)),
			want: &ValidationError{Field: "messages[1].id", Reason: "repeats messages[0].id " + uid(4)},
			msg:  "fsm: invalid messages[1].id: repeats messages[0].id " + uid(4)},
		{name: "bad input still fails first", cmd: appendAt("app", "acct-1", 0, clientMsg(a, "Opened", `[1]`)),
			want: &ValidationError{Field: "messages[0].data", Reason: "must be a JSON object"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, nil)
			f := newFeeder(t, s)
			f.must(createNS("app"))
			f.must(appendAt("app", "acct-1", 0, clientMsg(uid(0), "First", `{}`)))
			first := member[*fsmv1.AppendResult](f.must(orig()))
			if first.Duplicate || first.FirstPosition != 1 || first.FirstGlobalPosition != 2 {
				t.Fatalf("original append: %+v", first)
			}
			before := snapshotOf(t, s, "app")
			index := f.next
			got := f.apply(tc.cmd)[0]
			if !sameAnswer(got, answerAt(index, "append", tc.want)) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
			if err, ok := got.(error); ok {
				if tc.msg != "" && err.Error() != tc.msg {
					t.Fatalf("message %q, want %q", err.Error(), tc.msg)
				}
				if _, dup := err.(*DuplicateIDError); dup && !errors.Is(err, ErrDuplicateID) {
					t.Fatal("errors.Is(ErrDuplicateID) is false")
				}
			}
			// Nothing written: every message as before, and the next append
			// gets the next positions.
			if after := snapshotOf(t, s, "app"); !reflect.DeepEqual(after, before) {
				t.Fatalf("namespace changed:\n%+v\nwas\n%+v", after, before)
			}
			next := member[*fsmv1.AppendResult](f.must(appendAt("app", "acct-1", 0, clientMsg(uid(9), "Next", `{}`))))
			if next.FirstPosition != 3 || next.FirstGlobalPosition != 4 {
				t.Fatalf("next append at %d/%d, want 3/4", next.FirstPosition, next.FirstGlobalPosition)
			}
		})
	}
}

// A retry in the same ApplyBatch call as its original is answered from the
// staged ids (the database does not hold them yet).
func TestIdempotentAppendSameBatch(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	m := func() *fsmv1.NewMessage { return clientMsg(uid(1), "T", `{"a":1}`) }
	res := f.apply(
		appendAt("app", "s-1", 0, m()),
		appendAt("app", "s-1", time.Second, m()),
		appendAt("app", "s-2", 2*time.Second, clientMsg(uid(1), "T", `{"a":1}`)),
	)
	if r := member[*fsmv1.AppendResult](res[0]); r.Duplicate || r.FirstGlobalPosition != 1 {
		t.Fatalf("original: %+v", r)
	}
	if r, ok := memberOK[*fsmv1.AppendResult](res[1]); !ok || !r.Duplicate || r.FirstGlobalPosition != 1 || r.FirstPosition != 0 || res[1].(*fsmv1.Result).Index != 3 {
		t.Fatalf("retry: %#v", res[1])
	}
	var de *DuplicateIDError
	if !errors.As(res[2].(error), &de) || de.Reason != DuplicateContent || de.Stream != "s-1" {
		t.Fatalf("other stream: %#v", res[2])
	}
	if msgs := snapshotOf(t, s, "app"); len(msgs) != 1 {
		t.Fatalf("namespace holds %d messages, want 1", len(msgs))
	}
}

// Ids the leader generated (client_id false: also every entry written
// before idempotent writes existed) and namespaces with dedupe off keep the
// old behaviour: the same id may be written again.
func TestDedupeNotApplied(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	f.must(createNSWindow("off", DedupeOff))
	gen := &fsmv1.NewMessage{Id: uid(1), Type: "T", Data: []byte(`{}`)}
	for range 2 {
		if r := member[*fsmv1.AppendResult](f.must(appendAt("app", "s-1", 0, gen))); r.Duplicate {
			t.Fatalf("generated id deduplicated: %+v", r)
		}
	}
	// An id first written without client_id (old data, no index entry) is
	// not remembered: the client's write of it is new.
	if r := member[*fsmv1.AppendResult](f.must(appendAt("app", "s-1", 0, clientMsg(uid(1), "T", `{}`)))); r.Duplicate || r.FirstPosition != 2 {
		t.Fatalf("client write of an unindexed id: %+v", r)
	}
	for range 2 {
		if r := member[*fsmv1.AppendResult](f.must(appendAt("off", "s-1", 0, clientMsg(uid(2), "T", `{}`)))); r.Duplicate {
			t.Fatalf("dedupe off deduplicated: %+v", r)
		}
	}
	if n := len(snapshotOf(t, s, "off")); n != 2 {
		t.Fatalf("dedupe off: %d messages, want 2", n)
	}
	if keys := countKeys(t, s, "off", prefixDedupe); keys != 0 {
		t.Fatalf("dedupe off wrote %d index keys", keys)
	}
}

func countKeys(t *testing.T, s *Store, ns string, prefix []byte) int {
	t.Helper()
	it, err := view(t, s, ns).iter(prefix, prefixEnd(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	return n
}

func TestDedupeWindow(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	const w = 10 * time.Second
	f.must(createNSWindow("app", int64(w)))
	m := func(n int) *fsmv1.NewMessage { return clientMsg(uid(n), "T", fmt.Sprintf(`{"n":%d}`, n)) }
	f.must(appendAt("app", "s-1", 0, m(1)))
	// Within the window by entry time: a retry.
	if r := member[*fsmv1.AppendResult](f.must(appendAt("app", "s-1", 9*time.Second, m(1)))); !r.Duplicate {
		t.Fatalf("retry within the window written: %+v", r)
	}
	// A later append from a leader whose clock is behind does not move the
	// dedupe clock back, nor hide ids.
	f.must(appendAt("app", "s-1", 15*time.Second, m(2)))
	if r := member[*fsmv1.AppendResult](f.must(appendAt("app", "s-1", -time.Hour, m(2)))); !r.Duplicate {
		t.Fatalf("retry with an older entry time written: %+v", r)
	}
	if v := view(t, s, "app"); true {
		if got, ok, err := v.LookupID(uid(2)); err != nil || !ok || got.GlobalPosition != 2 {
			t.Fatalf("LookupID = %+v %v %v", got, ok, err)
		}
	}
	// Past twice the window: forgotten (a new write) and expired (the
	// bucket's keys are gone).
	if r := member[*fsmv1.AppendResult](f.must(appendAt("app", "s-1", 50*time.Second, m(1)))); r.Duplicate || r.FirstPosition != 2 {
		t.Fatalf("write past the window: %+v", r)
	}
	if keys := countKeys(t, s, "app", prefixDedupe); keys != 1 {
		t.Fatalf("%d index keys after expiry, want 1 (the last write's)", keys)
	}
}

func TestDedupeForever(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNSWindow("app", DedupeForever))
	f.must(appendAt("app", "s-1", 0, clientMsg(uid(1), "T", `{}`)))
	f.must(appendAt("app", "s-1", 24*365*time.Hour, clientMsg(uid(2), "T", `{}`)))
	if r := member[*fsmv1.AppendResult](f.must(appendAt("app", "s-1", 24*365*time.Hour, clientMsg(uid(1), "T", `{}`)))); !r.Duplicate || r.FirstPosition != 0 {
		t.Fatalf("retry a year later: %+v", r)
	}
	if keys := countKeys(t, s, "app", prefixDedupe); keys != 2 {
		t.Fatalf("%d index keys, want 2", keys)
	}
}

func TestDedupeWindowValidation(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	for _, tc := range []struct {
		window int64
		err    string
	}{
		{0, ""}, {DedupeOff, ""}, {DedupeForever, ""}, {int64(time.Second), ""}, {int64(24 * time.Hour), ""},
		{int64(time.Second - 1), "fsm: invalid dedupe_window: must be at least 1s (or 0 for the default, -1 for off, -2 for forever), got 999999999 ns"},
		{-3, "fsm: invalid dedupe_window: must be at least 1s (or 0 for the default, -1 for off, -2 for forever), got -3 ns"},
	} {
		name := fmt.Sprintf("w%d", f.next)
		r := f.apply(createNSWindow(name, tc.window))[0]
		err, _ := r.(error)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("window %d: %v", tc.window, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("window %d: got %v, want %q", tc.window, r, tc.err)
		case tc.err != "":
			if _, ok := s.Namespace(name); ok {
				t.Errorf("window %d: namespace created", tc.window)
			}
		default:
			info, _ := s.Namespace(name)
			if info.DedupeWindowNanos != tc.window {
				t.Errorf("window %d stored as %d", tc.window, info.DedupeWindowNanos)
			}
		}
	}
}

// The index and the dedupe clock survive a restart and a checkpoint
// install: a retry after either is still answered with the original.
func TestDedupeSurvivesRestartAndRestore(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	s := openTestStore(t, fs)
	f := newFeeder(t, s)
	f.must(createNSWindow("app", int64(10*time.Second)))
	f.must(appendAt("app", "s-1", 0, clientMsg(uid(1), "T", `{}`)))
	f.must(appendAt("app", "s-1", 12*time.Second, clientMsg(uid(2), "T", `{}`)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	next := f.next
	s = openTestStore(t, fs)
	f = newFeeder(t, s)
	f.next = next // Raft would replay nothing: the store holds every entry
	// The clock (12 s) came back with the index: the retry is found
	// although its own entry time is older.
	if r := member[*fsmv1.AppendResult](f.must(appendAt("app", "s-1", 0, clientMsg(uid(2), "T", `{}`)))); !r.Duplicate || r.FirstPosition != 1 {
		t.Fatalf("retry after restart: %+v", r)
	}
	_, stream := checkpointStream(t, s)
	rfs := vfs.NewMem()
	if _, err := RestoreDir(rfs, "/restored/fsm", bytes.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	r := openTestStore(t, rfs, func(o *Options) { o.Dir = "/restored/fsm" })
	rf := newFeeder(t, r)
	rf.next = f.next
	if res := member[*fsmv1.AppendResult](rf.must(appendAt("app", "s-1", 0, clientMsg(uid(1), "T", `{}`)))); !res.Duplicate || res.FirstPosition != 0 {
		t.Fatalf("retry after restore: %+v", res)
	}
	if res := member[*fsmv1.AppendResult](rf.must(appendAt("app", "s-1", 0, clientMsg(uid(3), "T", `{}`)))); res.Duplicate || res.FirstPosition != 2 {
		t.Fatalf("new write after restore: %+v", res)
	}
}

// The in-memory filter has no false negatives (apply's answers must not
// depend on it) and few false positives.
func TestIDFilter(t *testing.T) {
	t.Parallel()
	f := newIDFilter()
	const n = 100_000
	for i := range n {
		f.add(int64(i%3), uid(i))
	}
	for i := range n {
		if !f.mayContain(int64(i%3), uid(i)) {
			t.Fatalf("id %d missing from its bucket", i)
		}
	}
	fp := 0
	for i := n; i < 2*n; i++ {
		if f.mayContain(int64(i%3), uid(i)) {
			fp++
		}
	}
	if fp > n*3/100 { // a false positive costs one database read
		t.Fatalf("%d false positives in %d lookups", fp, n)
	}
	f.expire(2)
	if f.mayContain(0, uid(0)) || f.mayContain(1, uid(1)) || !f.mayContain(2, uid(2)) {
		t.Fatal("expire kept the wrong buckets")
	}
}

// TestRetryIsOneEarlierAppend: an append is a retry only when its ids are
// one earlier append in order, all of it or a run of it. Ids of two
// appends that happen to sit side by side in the stream (Append i-1
// [A1,A2], Append i-1 [B1], Append i-1 [A2,B1]) are refused as mixed,
// whether the appends are committed, staged in the same batch, or their
// messages deleted since; the retries the rule keeps still answer the
// original positions.
func TestRetryIsOneEarlierAppend(t *testing.T) {
	t.Parallel()
	a1, a2, b1 := clientMsg(uid(1), "A", `{"n":1}`), clientMsg(uid(2), "A", `{"n":2}`), clientMsg(uid(3), "B", `{"n":3}`)
	first := appendAt("app", "i-1", 0, a1, a2)      // positions 0-1, global 1-2
	second := appendAt("app", "i-1", 0, b1)         // position 2, global 3
	dup := func(fp, lp int64) *fsmv1.AppendResult { // gp = position + 1
		return &fsmv1.AppendResult{Namespace: "app", Stream: "i-1", FirstPosition: fp, LastPosition: lp, FirstGlobalPosition: fp + 1, LastGlobalPosition: lp + 1, Duplicate: true}
	}
	acrossAppends := &DuplicateIDError{Message: 1, ID: b1.Id, Stream: "i-1", Position: 2, GlobalPosition: 3, Reason: DuplicateMixed}
	for _, tc := range []struct {
		name  string
		setup string // how the first two appends are written
		cmd   *fsmv1.Command
		want  any // *fsmv1.AppendResult (Index filled in) or error
	}{
		{"ids of two appends", "committed", appendAt("app", "i-1", 0, a2, b1), acrossAppends},
		{"ids of two appends, staged in the same batch", "staged", appendAt("app", "i-1", 0, a2, b1), acrossAppends},
		{"ids of two appends, deleted since", "deleted", appendAt("app", "i-1", 0, a2, b1), acrossAppends},
		{"all three ids", "committed", appendAt("app", "i-1", 0, a1, a2, b1),
			&DuplicateIDError{Message: 2, ID: b1.Id, Stream: "i-1", Position: 2, GlobalPosition: 3, Reason: DuplicateMixed}},
		{"ids of two appends as one AppendMulti part", "committed", multiCmd("app", streamPart("i-1", nil, a2, b1)),
			&DuplicateIDError{Message: 1, Field: "streams[0].messages[1]", ID: b1.Id, Stream: "i-1", Position: 2, GlobalPosition: 3, Reason: DuplicateMixed}},
		{"the first append again", "committed", appendAt("app", "i-1", 0, a1, a2), dup(0, 1)},
		{"the first append again, staged", "staged", appendAt("app", "i-1", 0, a1, a2), dup(0, 1)},
		{"the first append again, deleted since", "deleted", appendAt("app", "i-1", 0, a1, a2), dup(0, 1)},
		{"a run of the first append", "committed", appendAt("app", "i-1", 0, a2), dup(1, 1)},
		{"the second append again", "committed", appendAt("app", "i-1", 0, b1), dup(2, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, nil)
			f := newFeeder(t, s)
			f.must(createNS("app"))
			var got any
			switch tc.setup {
			case "staged":
				res := f.apply(first, second, tc.cmd)
				got = res[2]
			case "deleted":
				f.must(first)
				f.must(second)
				f.must(truncateCmd("app", "i-1", 3))
				got = f.apply(tc.cmd)[0]
			default:
				f.must(first)
				f.must(second)
				got = f.apply(tc.cmd)[0]
			}
			if !sameAnswer(got, answerAt(f.next-1, "append", tc.want)) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
			if v, err := view(t, s, "app").StreamVersion("i-1"); err != nil || v != 2 {
				t.Fatalf("version %d (%v) after the call, want 2: nothing written", v, err)
			}
		})
	}
}

// TestRetryOfIDsRecordedBefore: index entries written before an entry
// kept its offset in its append (16 bytes and the stream; 8 bytes) are
// still read: a retry of such an append is answered, and so is one of a
// deleted message whose entry names its stream. Which append wrote such
// ids is unknown, so ids side by side pass as one append, as they did.
func TestRetryOfIDsRecordedBefore(t *testing.T) {
	t.Parallel()
	a1, a2, b1 := clientMsg(uid(1), "A", `{"n":1}`), clientMsg(uid(2), "A", `{"n":2}`), clientMsg(uid(3), "B", `{"n":3}`)
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	f.must(appendAt("app", "i-1", 0, a1, a2))
	f.must(appendAt("app", "i-1", 0, b1))
	// Rewrite the entries as the two earlier formats wrote them.
	ns, err := s.acquire("app")
	if err != nil {
		t.Fatal(err)
	}
	_, bucket := dedupeBuckets(int64(DefaultDedupeWindow), testTime)
	for i, m := range []*fsmv1.NewMessage{a1, a2, b1} {
		gp, pos := int64(i+1), int64(i)
		v := appendUint64(appendUint64(nil, uint64(gp)), uint64(pos))
		v = append(v, "i-1"...)
		if m == a1 {
			v = encodeUint64(gp)
		}
		key := appendDedupeKey(nil, bucket, m.Id)
		if old, err := get(ns.db, key); err != nil || len(old) != 16+2+len("i-1") {
			t.Fatalf("entry of %s: %x, %v; want the current format", m.Id, old, err)
		}
		if err := ns.db.Set(key, v, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.release(ns)
	for _, tc := range []struct {
		name string
		cmd  *fsmv1.Command
		want any
	}{
		{"8-byte entries", appendAt("app", "i-1", 0, a1, a2), &fsmv1.AppendResult{Namespace: "app", Stream: "i-1", FirstPosition: 0, LastPosition: 1, FirstGlobalPosition: 1, LastGlobalPosition: 2, Duplicate: true}},
		{"16-byte entries", appendAt("app", "i-1", 0, b1), &fsmv1.AppendResult{Namespace: "app", Stream: "i-1", FirstPosition: 2, LastPosition: 2, FirstGlobalPosition: 3, LastGlobalPosition: 3, Duplicate: true}},
		{"side by side", appendAt("app", "i-1", 0, a2, b1), &fsmv1.AppendResult{Namespace: "app", Stream: "i-1", FirstPosition: 1, LastPosition: 2, FirstGlobalPosition: 2, LastGlobalPosition: 3, Duplicate: true}},
	} {
		got := f.apply(tc.cmd)[0]
		if !sameAnswer(got, answerAt(f.next-1, "append", tc.want)) {
			t.Fatalf("%s: got %#v, want %#v", tc.name, got, tc.want)
		}
	}
	f.must(truncateCmd("app", "i-1", 3))
	if r, ok := memberOK[*fsmv1.AppendResult](f.apply(appendAt("app", "i-1", 0, b1))[0]); !ok || !r.Duplicate || r.FirstPosition != 2 {
		t.Fatalf("retry of a deleted message with a 16-byte entry: %#v", r)
	}
}
