package fsm

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

const (
	scopeNS     = fsmv1.RetentionScope_RETENTION_SCOPE_NAMESPACE
	scopeCat    = fsmv1.RetentionScope_RETENTION_SCOPE_CATEGORY
	scopeStream = fsmv1.RetentionScope_RETENTION_SCOPE_STREAM
)

func policyCmd(ns string, scope fsmv1.RetentionScope, name string, age time.Duration, count int64) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_SetRetentionPolicy{SetRetentionPolicy: &fsmv1.SetRetentionPolicy{
		Namespace: ns,
		Policy:    &fsmv1.RetentionPolicy{Scope: scope, Name: name, MaxAgeNanos: int64(age), MaxCount: count},
	}}}
}

func expireCmd(ns string, now, maxMessages int64) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_ExpireMessages{ExpireMessages: &fsmv1.ExpireMessages{
		Namespace: ns, TimeUnixNano: now, MaxMessages: maxMessages,
	}}}
}

func appendTimed(ns, stream string, at int64, n int) *fsmv1.Command {
	msgs := make([]*fsmv1.NewMessage, n)
	for i := range msgs {
		msgs[i] = newMsg("T", `{}`)
	}
	c := appendCmd(ns, stream, msgs...)
	c.GetAppend().TimeUnixNano = at
	return c
}

func expiryOf(t *testing.T, r any) *fsmv1.ExpiryResult {
	t.Helper()
	e, ok := memberOK[*fsmv1.ExpiryResult](r)
	if !ok {
		t.Fatalf("result %T %v, want an ExpiryResult", r, r)
	}
	return e
}

// survivors maps each stream to the positions it still holds.
func survivors(t *testing.T, s *Store, ns string, streams ...string) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	for _, st := range streams {
		pos, _ := positions(streamOf(t, s, ns, st))
		out[st] = pos
	}
	return out
}

func posRange(lo, hi int64) []int64 {
	var out []int64
	for p := lo; p <= hi; p++ {
		out = append(out, p)
	}
	return out
}

// retentionStreams: a-1 gets 6 messages, a-2 3, b-1 5; positions 0.. each.
var retentionStreams = []struct {
	stream string
	n      int
}{{"a-1", 6}, {"a-2", 3}, {"b-1", 5}}

func TestRetentionMaxCount(t *testing.T) {
	t.Parallel()
	type pol struct {
		scope fsmv1.RetentionScope
		name  string
		count int64
	}
	for _, tc := range []struct {
		name     string
		policies []pol
		// set before the appends (the append path queues) or after (the
		// policy change queues the streams already over it)
		after bool
		want  map[string][]int64
	}{
		{"stream", []pol{{scopeStream, "a-1", 2}}, false,
			map[string][]int64{"a-1": {4, 5}, "a-2": posRange(0, 2), "b-1": posRange(0, 4)}},
		{"category", []pol{{scopeCat, "a", 2}}, false,
			map[string][]int64{"a-1": {4, 5}, "a-2": {1, 2}, "b-1": posRange(0, 4)}},
		{"namespace", []pol{{scopeNS, "", 4}}, false,
			map[string][]int64{"a-1": posRange(2, 5), "a-2": posRange(0, 2), "b-1": posRange(1, 4)}},
		{"strictest wins", []pol{{scopeNS, "", 4}, {scopeCat, "a", 3}, {scopeStream, "a-1", 5}}, false,
			map[string][]int64{"a-1": posRange(3, 5), "a-2": posRange(0, 2), "b-1": posRange(1, 4)}},
		{"set after the writes", []pol{{scopeCat, "a", 1}, {scopeStream, "b-1", 2}}, true,
			map[string][]int64{"a-1": {5}, "a-2": {2}, "b-1": {3, 4}}},
		{"namespace set after the writes", []pol{{scopeNS, "", 3}}, true,
			map[string][]int64{"a-1": posRange(3, 5), "a-2": posRange(0, 2), "b-1": posRange(2, 4)}},
		{"over no stream", []pol{{scopeStream, "a-1", 100}}, false,
			map[string][]int64{"a-1": posRange(0, 5), "a-2": posRange(0, 2), "b-1": posRange(0, 4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, nil)
			f := newFeeder(t, s)
			f.must(createNS("ns"))
			setAll := func() {
				for _, p := range tc.policies {
					f.must(policyCmd("ns", p.scope, p.name, 0, p.count))
				}
			}
			if !tc.after {
				setAll()
			}
			for _, rs := range retentionStreams {
				for range rs.n {
					f.must(appendTimed("ns", rs.stream, testTime, 1))
				}
			}
			if tc.after {
				setAll()
			}
			before := streamCount(t, s)
			e := expiryOf(t, f.must(expireCmd("ns", testTime, 0)))
			got := survivors(t, s, "ns", "a-1", "a-2", "b-1")
			removed := int64(0)
			for _, rs := range retentionStreams {
				if !slices.Equal(got[rs.stream], tc.want[rs.stream]) {
					t.Errorf("%s keeps %v, want %v", rs.stream, got[rs.stream], tc.want[rs.stream])
				}
				removed += int64(rs.n - len(tc.want[rs.stream]))
			}
			if e.MessagesDeleted != removed || e.More {
				t.Errorf("expiry %+v, want %d deleted and no more", e, removed)
			}
			if c := streamCount(t, s); c.MessageCount != before.MessageCount-removed {
				t.Errorf("namespace counts %d messages after, want %d", c.MessageCount, before.MessageCount-removed)
			}
			// A second expiry finds nothing; the next append continues
			// at the next position and is capped at the next expiry.
			if e := expiryOf(t, f.must(expireCmd("ns", testTime, 0))); e.MessagesDeleted != 0 {
				t.Errorf("second expiry removed %d", e.MessagesDeleted)
			}
			r := member[*fsmv1.AppendResult](f.must(appendTimed("ns", "a-1", testTime, 1)))
			if r.FirstPosition != 6 {
				t.Errorf("append after expiry took position %d, want 6", r.FirstPosition)
			}
		})
	}
}

func streamCount(t *testing.T, s *Store) NamespaceStats {
	t.Helper()
	st, err := view(t, s, "ns").Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRetentionMaxAge(t *testing.T) {
	t.Parallel()
	sec := int64(time.Second)
	// Times: a-1 at t0+0..5 s (one message a second), a-2 at t0+0..2 s,
	// b-1 at t0+0..4 s, appended interleaved by time so global order
	// follows time.
	build := func(t *testing.T, policies ...*fsmv1.Command) (*Store, *feeder) {
		s := openTestStore(t, nil)
		f := newFeeder(t, s)
		f.must(createNS("ns"))
		for _, p := range policies {
			f.must(p)
		}
		for sec0 := range 6 {
			for _, rs := range retentionStreams {
				if sec0 < rs.n {
					f.must(appendTimed("ns", rs.stream, testTime+int64(sec0)*sec, 1))
				}
			}
		}
		return s, f
	}
	for _, tc := range []struct {
		name     string
		policies []*fsmv1.Command
		now      int64 // seconds after t0
		want     map[string][]int64
	}{
		// Age 3 s at t0+5 s: messages before t0+2 s go.
		{"namespace", []*fsmv1.Command{policyCmd("ns", scopeNS, "", 3*time.Second, 0)}, 5,
			map[string][]int64{"a-1": posRange(2, 5), "a-2": {2}, "b-1": posRange(2, 4)}},
		{"category", []*fsmv1.Command{policyCmd("ns", scopeCat, "a", 3*time.Second, 0)}, 5,
			map[string][]int64{"a-1": posRange(2, 5), "a-2": {2}, "b-1": posRange(0, 4)}},
		{"stream", []*fsmv1.Command{policyCmd("ns", scopeStream, "b-1", time.Second, 0)}, 5,
			map[string][]int64{"a-1": posRange(0, 5), "a-2": posRange(0, 2), "b-1": {4}}},
		// A message exactly max-age old stays (older than the limit goes).
		{"boundary", []*fsmv1.Command{policyCmd("ns", scopeStream, "a-1", 2*time.Second, 0)}, 4,
			map[string][]int64{"a-1": posRange(2, 5), "a-2": posRange(0, 2), "b-1": posRange(0, 4)}},
		{"strictest wins", []*fsmv1.Command{
			policyCmd("ns", scopeNS, "", 5*time.Second, 0),
			policyCmd("ns", scopeStream, "a-1", time.Second, 0),
			policyCmd("ns", scopeCat, "b", 10*time.Second, 0),
		}, 6, map[string][]int64{"a-1": {5}, "a-2": {1, 2}, "b-1": {1, 2, 3, 4}}},
		{"category empties a stream", []*fsmv1.Command{policyCmd("ns", scopeCat, "a", time.Second, 0)}, 5,
			map[string][]int64{"a-1": {4, 5}, "a-2": nil, "b-1": posRange(0, 4)}},
		{"age and count", []*fsmv1.Command{policyCmd("ns", scopeCat, "a", 4*time.Second, 2)}, 5,
			map[string][]int64{"a-1": {4, 5}, "a-2": {1, 2}, "b-1": posRange(0, 4)}},
		{"nothing old yet", []*fsmv1.Command{policyCmd("ns", scopeNS, "", time.Hour, 0)}, 5,
			map[string][]int64{"a-1": posRange(0, 5), "a-2": posRange(0, 2), "b-1": posRange(0, 4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, f := build(t, tc.policies...)
			e := expiryOf(t, f.must(expireCmd("ns", testTime+tc.now*sec, 0)))
			got := survivors(t, s, "ns", "a-1", "a-2", "b-1")
			removed, streams := int64(0), int64(0)
			for _, rs := range retentionStreams {
				if !slices.Equal(got[rs.stream], tc.want[rs.stream]) {
					t.Errorf("%s keeps %v, want %v", rs.stream, got[rs.stream], tc.want[rs.stream])
				}
				if n := int64(rs.n - len(tc.want[rs.stream])); n > 0 {
					removed += n
					streams++
				}
			}
			if e.MessagesDeleted != removed || e.Streams != streams {
				t.Errorf("expiry %+v, want %d deleted from %d streams", e, removed, streams)
			}
			if tc.want["a-2"] == nil {
				if st := streamCount(t, s); st.StreamCount != 2 {
					t.Errorf("stream count %d after a-2 emptied, want 2", st.StreamCount)
				}
			}
		})
	}
}

// An expiry entry removes at most max_messages and says when more are
// due; the next entries finish the work, and the outcome is the same as
// one unbounded entry's.
func TestRetentionBatchBound(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(policyCmd("ns", scopeNS, "", time.Second, 0))
	for i := range 10 {
		f.must(appendTimed("ns", fmt.Sprintf("s-%d", i%3), testTime, 2))
	}
	now := testTime + int64(time.Minute)
	var total int64
	for i := 0; ; i++ {
		e := expiryOf(t, f.must(expireCmd("ns", now, 7)))
		total += e.MessagesDeleted
		if e.MessagesDeleted > 7 {
			t.Fatalf("entry %d removed %d, bound 7", i, e.MessagesDeleted)
		}
		if !e.More {
			break
		}
		if i > 10 {
			t.Fatal("expiry never finished")
		}
	}
	if total != 20 {
		t.Fatalf("removed %d in all, want 20", total)
	}
	if st := streamCount(t, s); st.MessageCount != 0 {
		t.Fatalf("%d messages left", st.MessageCount)
	}

	// The count pass: 10 streams of 3 capped at 1. Each visited stream
	// counts as work too, so an entry with bound 7 visits three (2
	// removed + 1 visit each), and the queue keeps the rest.
	f.must(policyCmd("ns", scopeNS, "", 0, 1))
	f.must(policyCmd("ns", scopeNS, "", 0, 1)) // unchanged: no second queueing
	for i := range 10 {
		f.must(appendTimed("ns", fmt.Sprintf("c-%d", i), now, 3))
	}
	total, entries := int64(0), 0
	for more := true; more; entries++ {
		e := expiryOf(t, f.must(expireCmd("ns", now, 7)))
		total += e.MessagesDeleted
		more = e.More
		if entries > 10 {
			t.Fatal("expiry never finished")
		}
	}
	if total != 20 || entries != 4 {
		t.Fatalf("count pass removed %d in %d entries, want 20 in 4 (3+3+3+1 streams)", total, entries)
	}
	for i := range 10 {
		if got := survivors(t, s, "ns", fmt.Sprintf("c-%d", i))[fmt.Sprintf("c-%d", i)]; !slices.Equal(got, []int64{2}) {
			t.Fatalf("c-%d keeps %v, want [2]", i, got)
		}
	}
}

func TestRetentionBadInput(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(appendTimed("ns", "a-1", testTime, 3))
	for _, tc := range []struct {
		name  string
		cmd   *fsmv1.Command
		field string // "" for a non-validation error
		is    error
	}{
		{"negative age", policyCmd("ns", scopeNS, "", -time.Second, 0), "policy.max_age", nil},
		{"negative count", policyCmd("ns", scopeStream, "a-1", 0, -1), "policy.max_count", nil},
		{"no scope", policyCmd("ns", 0, "", 0, 1), "policy.scope", nil},
		{"namespace with a name", policyCmd("ns", scopeNS, "a", 0, 1), "policy.name", nil},
		{"category with a dash", policyCmd("ns", scopeCat, "a-1", 0, 1), "policy.name", nil},
		{"empty stream", policyCmd("ns", scopeStream, "", 0, 1), "policy.name", nil},
		{"no policy", &fsmv1.Command{Kind: &fsmv1.Command_SetRetentionPolicy{SetRetentionPolicy: &fsmv1.SetRetentionPolicy{Namespace: "ns"}}}, "policy", nil},
		{"unknown namespace", policyCmd("nope", scopeNS, "", 0, 1), "", ErrNamespaceNotFound},
		{"expire unknown namespace", expireCmd("nope", testTime, 0), "", ErrNamespaceNotFound},
		{"expire negative bound", expireCmd("ns", testTime, -1), "max_messages", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := contentHash(t, s)
			r := f.apply(tc.cmd)[0]
			err, _ := r.(error)
			var ve *ValidationError
			switch {
			case tc.is != nil && !errors.Is(err, tc.is):
				t.Fatalf("result %v, want %v", r, tc.is)
			case tc.is == nil && (!errors.As(err, &ve) || ve.Field != tc.field):
				t.Fatalf("result %v, want a validation error of %s", r, tc.field)
			}
			if after := contentHash(t, s); after != before {
				t.Fatal("a refused command changed the state")
			}
		})
	}
	if ps, err := view(t, s, "ns").RetentionPolicies(); err != nil || len(ps) != 0 {
		t.Fatalf("policies %v (err %v) after refused commands, want none", ps, err)
	}
}

// Policies survive a reopen (they live in the namespace database), are
// listed in order, are removed by a policy with no limit, and the hint of
// the namespace goes with it when it is deleted.
func TestRetentionPoliciesStored(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	s := openTestStore(t, fs)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(createNS("other"))
	f.must(policyCmd("ns", scopeStream, "z-1", 0, 5))
	f.must(policyCmd("ns", scopeCat, "a", time.Hour, 0))
	f.must(policyCmd("ns", scopeNS, "", time.Hour, 10))
	r := member[*fsmv1.RetentionPolicyResult](f.must(policyCmd("ns", scopeCat, "a", 2*time.Hour, 0)))
	if !r.Replaced {
		t.Fatal("replacing a category's policy did not say so")
	}
	if got := s.RetainedNamespaces(); !slices.Equal(got, []string{"ns"}) {
		t.Fatalf("retained namespaces %v, want [ns]", got)
	}
	list := func(s *Store) string {
		v, err := s.View("ns")
		if err != nil {
			t.Fatal(err)
		}
		ps, err := v.RetentionPolicies()
		v.Close()
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, p := range ps {
			out += fmt.Sprintf("%d:%s:%v:%d ", p.Scope, p.Name, time.Duration(p.MaxAgeNanos), p.MaxCount)
		}
		return out
	}
	want := "1::1h0m0s:10 2:a:2h0m0s:0 3:z-1:0s:5 "
	if got := list(s); got != want {
		t.Fatalf("policies %q, want %q", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, fs)
	f = newFeeder(t, s)
	if got := list(s); got != want {
		t.Fatalf("policies after reopen %q, want %q", got, want)
	}
	// The loaded policies act: z-1 is capped at 5.
	f.must(appendTimed("ns", "z-1", testTime, 8))
	if e := expiryOf(t, f.must(expireCmd("ns", testTime, 0))); e.MessagesDeleted != 3 {
		t.Fatalf("expiry after reopen removed %d from z-1 (8 messages, max 5), want 3", e.MessagesDeleted)
	}
	// Set then clear in one batch: the clear wins, in memory and on disk.
	for _, r := range f.apply(policyCmd("ns", scopeStream, "q-1", 0, 1), policyCmd("ns", scopeStream, "q-1", 0, 0)) {
		if err, ok := r.(error); ok {
			t.Fatal(err)
		}
	}
	f.must(policyCmd("ns", scopeStream, "z-1", 0, 0))
	if got, want := list(s), "1::1h0m0s:10 2:a:2h0m0s:0 "; got != want {
		t.Fatalf("policies after clears %q, want %q", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, fs)
	f = newFeeder(t, s)
	if got, want := list(s), "1::1h0m0s:10 2:a:2h0m0s:0 "; got != want {
		t.Fatalf("policies after clears and reopen %q, want %q", got, want)
	}
	// Without policies the namespace leaves the leader's list; with one
	// again it is back; deleting it drops it.
	f.must(policyCmd("ns", scopeNS, "", 0, 0))
	f.must(policyCmd("ns", scopeCat, "a", 0, 0))
	if got := s.RetainedNamespaces(); len(got) != 0 {
		t.Fatalf("retained namespaces %v without policies, want none", got)
	}
	f.must(policyCmd("ns", scopeCat, "a", 0, 3))
	if got := s.RetainedNamespaces(); !slices.Equal(got, []string{"ns"}) {
		t.Fatalf("retained namespaces %v, want [ns]", got)
	}
	f.must(deleteNS("ns"))
	if got := s.RetainedNamespaces(); len(got) != 0 {
		t.Fatalf("retained namespaces %v after the delete, want none", got)
	}
	f.must(createNS("ns"))
	if ps, err := view(t, s, "ns").RetentionPolicies(); err != nil || len(ps) != 0 {
		t.Fatalf("a re-created namespace has policies %v (err %v)", ps, err)
	}
}

// An import with clear keeps the policies (configuration) and drops the
// messages and the expiry queue.
func TestRetentionImportClear(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(policyCmd("ns", scopeStream, "a-1", 0, 1))
	f.must(appendTimed("ns", "a-1", testTime, 3))
	f.must(&fsmv1.Command{Kind: &fsmv1.Command_Import{Import: &fsmv1.Import{Namespace: "ns", Clear: true}}})
	if ps, err := view(t, s, "ns").RetentionPolicies(); err != nil || len(ps) != 1 {
		t.Fatalf("policies after an import clear: %v (err %v), want the one", ps, err)
	}
	if e := expiryOf(t, f.must(expireCmd("ns", testTime, 0))); e.MessagesDeleted != 0 {
		t.Fatalf("expiry after the clear removed %d", e.MessagesDeleted)
	}
}
