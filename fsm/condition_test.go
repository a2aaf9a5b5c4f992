package fsm

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

func TestAppendCondition(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(appendCmd("ns", "course-c1", tagged("Defined", "course:c1")))                  // 1
	f.must(appendCmd("ns", "student-s1", tagged("Registered", "student:s1")))             // 2
	f.must(appendCmd("ns", "course-c1", tagged("Subscribed", "course:c1", "student:s1"))) // 3

	failed := func(t *testing.T, r any, gp, after int64) {
		t.Helper()
		var cf *ConditionFailedError
		if err, _ := r.(error); !errors.As(err, &cf) || cf.GlobalPosition != gp || cf.After != after {
			t.Fatalf("result %v, want condition failed at %d after %d", r, gp, after)
		}
	}
	t.Run("a match after the position fails", func(t *testing.T) {
		r := f.apply(conditional(appendCmd("ns", "course-c1", tagged("Subscribed", "course:c1", "student:s2")), cond(1, item(nil, "course:c1"))))[0]
		failed(t, r, 3, 1)
		if got := r.(error).Error(); got != "fsm: append condition failed: message at global position 3 matches the query and is after 1" {
			t.Fatalf("message %q", got)
		}
	})
	t.Run("no match after the position passes", func(t *testing.T) {
		r := f.must(conditional(appendCmd("ns", "course-c1", tagged("Subscribed", "course:c1", "student:s2")), cond(3, item(nil, "course:c1"))))
		if member[*fsmv1.AppendResult](r).FirstGlobalPosition != 4 {
			t.Fatalf("result %+v", r)
		}
	})
	t.Run("types and tags narrow the match", func(t *testing.T) {
		// Subscribed with student:s1 exists at 3; Registered with course:c1 does not.
		r := f.apply(conditional(appendCmd("ns", "x-1", tagged("T")), cond(0, item([]string{"Registered"}, "course:c1"))))[0]
		if _, ok := memberOK[*fsmv1.AppendResult](r); !ok {
			t.Fatalf("result %v, want written", r)
		}
		r = f.apply(conditional(appendCmd("ns", "x-1", tagged("T")), cond(0, item([]string{"Registered"}, "course:c1"), item([]string{"Subscribed"}, "student:s1"))))[0]
		failed(t, r, 3, 0)
	})
	t.Run("AppendMulti", func(t *testing.T) {
		next, _ := view(t, s, "ns").NextGlobalPosition()
		c := conditional(multiCmd("ns", streamPart("a-1", nil, tagged("T", "k")), streamPart("b-1", nil, tagged("T", "k"))), cond(0, item(nil, "student:s2")))
		failed(t, f.apply(c)[0], 4, 0)
		if got, _ := view(t, s, "ns").NextGlobalPosition(); got != next {
			t.Fatalf("refused AppendMulti wrote: next %d, was %d", got, next)
		}
		c = conditional(multiCmd("ns", streamPart("a-1", nil, tagged("T", "k")), streamPart("b-1", nil, tagged("T", "k"))), cond(next-1, item(nil, "k")))
		if r := member[*fsmv1.AppendMultiResult](f.must(c)); r.FirstGlobalPosition != next {
			t.Fatalf("result %+v", r)
		}
	})
	t.Run("an earlier entry of the same batch counts", func(t *testing.T) {
		next, _ := view(t, s, "ns").NextGlobalPosition()
		rs := f.apply(
			appendCmd("ns", "d-1", tagged("T", "fresh")),
			conditional(appendCmd("ns", "d-2", tagged("T", "fresh")), cond(next-1, item(nil, "fresh"))),
		)
		failed(t, rs[1], next, next-1)
	})
}

// Within one ApplyBatch a condition sees the tagged messages staged before
// it, and not those an import's clear removed.
func TestConditionWithinOneBatch(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(appendCmd("ns", "a-1", tagged("T", "k"), tagged("T", "k"))) // 1, 2 committed
	rs := f.apply(
		appendCmd("ns", "a-2", tagged("U", "other")),                                             // 3
		appendCmd("ns", "a-2", tagged("U", "k", "x")),                                            // 4
		conditional(appendCmd("ns", "a-3", tagged("T", "z")), cond(2, item([]string{"T"}, "k"))), // 5: no T with k after 2
		conditional(appendCmd("ns", "a-3", tagged("T", "z")), cond(2, item(nil, "k", "x"))),      // 4 matches
		conditional(appendCmd("ns", "a-3", tagged("T", "z")), cond(1, item(nil, "k"))),           // 2 (committed) first
		importCmd("ns", true, rec("b-1", 0, 1, "T")),                                             // clear: 1 left, untagged
		conditional(appendCmd("ns", "a-4", tagged("T", "k")), cond(1, item(nil, "k"))),           // 2: nothing tagged k after 1
		conditional(appendCmd("ns", "a-4", tagged("T", "k")), cond(1, item(nil, "k"))),           // 2 matches
	)
	want := []string{"written 3", "written 4", "written 5", "failed 4", "failed 2", "imported", "written 2", "failed 2"}
	for i, r := range rs {
		var got string
		var cf *ConditionFailedError
		switch r := r.(type) {
		case *fsmv1.Result:
			if a := r.GetAppend(); a != nil {
				got = fmt.Sprintf("written %d", a.FirstGlobalPosition)
			} else if r.GetImport() != nil {
				got = "imported"
			}
		case error:
			if errors.As(r, &cf) {
				got = fmt.Sprintf("failed %d", cf.GlobalPosition)
			} else {
				got = r.Error()
			}
		}
		if got != want[i] {
			t.Fatalf("entry %d: %s, want %s", i, got, want[i])
		}
	}
}

// A retry of a conditional append that was written answers the original
// positions, although its own first write now matches the condition.
func TestConditionalRetryIsDuplicate(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	m := tagged("T", "k")
	m.Id, m.ClientId = uid(1), true
	c := conditional(appendCmd("ns", "a-1", m), cond(0, item(nil, "k")))
	first := member[*fsmv1.AppendResult](f.must(c))
	again := member[*fsmv1.AppendResult](f.must(c))
	if !again.Duplicate || again.FirstGlobalPosition != first.FirstGlobalPosition {
		t.Fatalf("retry = %+v, want duplicate of %+v", again, first)
	}
	// A retry with other tags is not the same append.
	m2 := tagged("T", "other")
	m2.Id, m2.ClientId = uid(1), true
	var de *DuplicateIDError
	if r := f.apply(appendCmd("ns", "a-1", m2))[0]; !errors.As(r.(error), &de) || de.Reason != DuplicateContent {
		t.Fatalf("retry with other tags = %v, want duplicate id (content)", r)
	}
}

func TestConditionValidation(t *testing.T) {
	t.Parallel()
	many := make([]string, MaxMessageTags+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	items := make([]*fsmv1.QueryItem, MaxQueryItems+1)
	for i := range items {
		items[i] = &fsmv1.QueryItem{Tags: []string{"t"}}
	}
	cases := []struct {
		name  string
		cond  *fsmv1.AppendCondition
		field string
		desc  string
	}{
		{"no query", &fsmv1.AppendCondition{}, "condition.fail_if_events_match", "must be set"},
		{"empty query", &fsmv1.AppendCondition{FailIfEventsMatch: &fsmv1.Query{}}, "condition.fail_if_events_match.items", "must hold 1..16 items, got 0"},
		{"too many items", &fsmv1.AppendCondition{FailIfEventsMatch: &fsmv1.Query{Items: items}}, "condition.fail_if_events_match.items", "must hold 1..16 items, got 17"},
		{"empty item", cond(0, item(nil)), "condition.fail_if_events_match.items[0]", "must name at least one type or tag"},
		{"too many tags", cond(0, item(nil, "a"), item(nil, many...)), "condition.fail_if_events_match.items[1].tags", "must hold at most 32 tags (a message carries no more), got 33"},
		{"empty tag", cond(0, item([]string{"T"}, "")), "condition.fail_if_events_match.items[0].tags[0]", "must not be empty"},
		{"empty type", cond(0, item([]string{""})), "condition.fail_if_events_match.items[0].types[0]", "must not be empty"},
		{"negative after", cond(-1, item(nil, "t")), "condition.after", "must not be negative, got -1"},
		{"future after", cond(2, item(nil, "t")), "condition.after", "is past the namespace's last global position 1, got 2"},
	}
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(appendCmd("ns", "a-1", tagged("T")))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []*fsmv1.Command{
				conditional(appendCmd("ns", "a-1", tagged("T")), tc.cond),
				conditional(multiCmd("ns", streamPart("a-1", nil, tagged("T"))), tc.cond),
			} {
				var ve *ValidationError
				if r := f.apply(c)[0]; !errors.As(r.(error), &ve) || ve.Field != tc.field || ve.Reason != tc.desc {
					t.Fatalf("%T: apply = %v, want invalid %s: %s", c.Kind, r, tc.field, tc.desc)
				}
			}
		})
	}
	if next, _ := view(t, s, "ns").NextGlobalPosition(); next != 2 {
		t.Fatalf("refused appends wrote something: next global position %d", next)
	}
}

// Conditional appends decide alike however Raft cuts the log into batches.
func TestConditionDeterministic(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(3))
	cmds := []*fsmv1.Command{createNS("ns")}
	tags := []string{"a", "b", "c", "d"}
	gp := int64(0) // a lower bound of the head: conditions must not be in the future
	for i := range 120 {
		tag := tags[rng.Intn(len(tags))]
		c := appendCmd("ns", fmt.Sprintf("s-%d", rng.Intn(5)), tagged("T", tag))
		switch i % 6 {
		case 5:
			cmds = append(cmds, truncateCmd("ns", fmt.Sprintf("s-%d", rng.Intn(5)), int64(rng.Intn(3))))
			continue
		default:
			c = conditional(c, cond(max(gp-int64(rng.Intn(4)), 0), item(nil, tag)))
		}
		cmds = append(cmds, c)
		gp += int64(i % 2) // some writes fail, so grow slowly
	}
	logs := commandEntries(t, 1, cmds...)
	var want []string
	var wantHash string
	for _, split := range []int{1, 2, 5, len(logs)} {
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
	failed, written := 0, 0
	for _, r := range want {
		switch {
		case strings.Contains(r, "condition failed"):
			failed++
		case strings.HasPrefix(r, "append "):
			written++
		}
	}
	if failed < 10 || written < 10 {
		t.Fatalf("the log tests little: %d conditions failed, %d appends written", failed, written)
	}
}
