package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

func multiCmd(ns string, parts ...*fsmv1.StreamAppend) *fsmv1.Command {
	return &fsmv1.Command{Kind: &fsmv1.Command_AppendMulti{AppendMulti: &fsmv1.AppendMulti{Namespace: ns, Streams: parts, TimeUnixNano: testTime}}}
}

func streamPart(stream string, exp *int64, msgs ...*fsmv1.NewMessage) *fsmv1.StreamAppend {
	return &fsmv1.StreamAppend{Stream: stream, ExpectedVersion: exp, Messages: msgs}
}

func TestAppendMulti(t *testing.T) {
	many := func(n int) []*fsmv1.NewMessage {
		out := make([]*fsmv1.NewMessage, n)
		for i := range out {
			out[i] = newMsg("T", `{}`)
		}
		return out
	}
	big := &fsmv1.NewMessage{Id: uid(50), Type: "T", Data: []byte(`{"x":"` + strings.Repeat("x", 1<<20-8) + `"}`)}
	tooManyStreams := make([]*fsmv1.StreamAppend, MaxMultiStreams+1)
	for i := range tooManyStreams {
		tooManyStreams[i] = streamPart(fmt.Sprintf("s-%d", i), nil, newMsg("T", `{}`))
	}
	nineBig := make([]*fsmv1.StreamAppend, 9)
	for i := range nineBig {
		nineBig[i] = streamPart(fmt.Sprintf("big-%d", i), nil, big)
	}
	cases := []struct {
		name string
		cmd  *fsmv1.Command
		want any
		msg  string
	}{
		{name: "all land, contiguous", cmd: multiCmd("app",
			streamPart("a-1", proto.Int64(0), clientMsg(uid(1), "T", `{"n":1}`), clientMsg(uid(2), "T", `{"n":2}`)),
			streamPart("b-1", proto.Int64(-1), clientMsg(uid(3), "T", `{}`)),
			streamPart("c-1", nil, newMsg("T", `{}`))),
			want: &fsmv1.AppendMultiResult{Namespace: "app", Streams: []*fsmv1.AppendResult{
				{Stream: "a-1", FirstPosition: 1, LastPosition: 2, FirstGlobalPosition: 2, LastGlobalPosition: 3},
				{Stream: "b-1", FirstPosition: 0, LastPosition: 0, FirstGlobalPosition: 4, LastGlobalPosition: 4},
				{Stream: "c-1", FirstPosition: 0, LastPosition: 0, FirstGlobalPosition: 5, LastGlobalPosition: 5},
			}, FirstGlobalPosition: 2, LastGlobalPosition: 5}},
		{name: "every conflict named", cmd: multiCmd("app",
			streamPart("a-1", proto.Int64(5), newMsg("T", `{}`)),
			streamPart("b-1", proto.Int64(-1), newMsg("T", `{}`)),
			streamPart("c-1", proto.Int64(3), newMsg("T", `{}`))),
			want: &VersionConflictsError{Conflicts: []VersionConflictError{{"a-1", 5, 0}, {"c-1", 3, -1}}},
			msg:  `fsm: expected versions do not match: stream "a-1" is at version 0, expected 5; stream "c-1" is at version -1, expected 3`},
		{name: "no streams", cmd: multiCmd("app"), want: &ValidationError{"streams", "must hold 1..100 streams, got 0"}},
		{name: "too many streams", cmd: multiCmd("app", tooManyStreams...), want: &ValidationError{"streams", "must hold 1..100 streams, got 101"}},
		{name: "a stream twice", cmd: multiCmd("app", streamPart("a-1", nil, newMsg("T", `{}`)), streamPart("a-1", nil, newMsg("T", `{}`))),
			want: &ValidationError{"streams[1].stream", `repeats streams[0].stream "a-1": give each stream once`}},
		{name: "no messages", cmd: multiCmd("app", streamPart("a-1", nil)), want: &ValidationError{"streams[0].messages", "must hold 1..1000 messages, got 0"}},
		{name: "empty stream name", cmd: multiCmd("app", streamPart("", nil, newMsg("T", `{}`))), want: &ValidationError{"streams[0].stream", "must not be empty"}},
		{name: "bad expected version", cmd: multiCmd("app", streamPart("a-1", proto.Int64(-2), newMsg("T", `{}`))),
			want: &ValidationError{"streams[0].expected_version", "must be -1 (no stream) or more, got -2"}},
		{name: "bad data", cmd: multiCmd("app", streamPart("a-1", nil, newMsg("T", `{}`)), streamPart("b-1", nil, newMsg("T", `[]`))),
			want: &ValidationError{"streams[1].messages[0].data", "must be a JSON object"}},
		{name: "too many messages", cmd: multiCmd("app", streamPart("a-1", nil, many(600)...), streamPart("b-1", nil, many(401)...)),
			want: &ValidationError{"streams", "must hold 1..1000 messages in all, got 1001"}},
		{name: "too many bytes", cmd: multiCmd("app", nineBig...),
			want: &ValidationError{"streams", fmt.Sprintf("data and metadata are %d bytes in all, at most 8388608 (8 MiB) per call", 9*len(big.Data))}},
		{name: "unknown namespace", cmd: multiCmd("nope", streamPart("a-1", nil, newMsg("T", `{}`))), want: ErrNamespaceNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, nil)
			f := newFeeder(t, s)
			f.must(createNS("app"))
			f.must(appendAt("app", "a-1", 0, newMsg("First", `{}`)))
			before := snapshotOf(t, s, "app")
			index := f.next
			got := f.apply(tc.cmd)[0]
			if !sameAnswer(got, answerAt(index, "append_multi", tc.want)) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
			if err, ok := got.(error); ok {
				if tc.msg != "" && err.Error() != tc.msg {
					t.Fatalf("message %q, want %q", err.Error(), tc.msg)
				}
				if after := snapshotOf(t, s, "app"); !reflect.DeepEqual(after, before) {
					t.Fatalf("a refused call wrote: %+v", after)
				}
				return
			}
			// The messages are where the result says, in one run of
			// global positions.
			all := snapshotOf(t, s, "app")
			for i, m := range all {
				if m.GlobalPosition != int64(i+1) {
					t.Fatalf("global positions %v", gpsOf(all))
				}
			}
		})
	}
}

func TestAppendMultiIdempotent(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	call := func() *fsmv1.Command {
		return multiCmd("app",
			streamPart("a-1", proto.Int64(-1), clientMsg(uid(1), "T", `{"n":1}`), clientMsg(uid(2), "T", `{"n":2}`)),
			streamPart("b-1", proto.Int64(-1), clientMsg(uid(3), "T", `{}`)))
	}
	orig := member[*fsmv1.AppendMultiResult](f.must(call()))
	before := snapshotOf(t, s, "app")
	index := f.next
	retry := f.apply(call())[0]
	want := proto.Clone(orig).(*fsmv1.AppendMultiResult)
	want.Duplicate = true
	if !sameAnswer(retry, answerAt(index, "append_multi", want)) {
		t.Fatalf("retry: %#v, want %#v", retry, want)
	}
	changed := call()
	changed.GetAppendMulti().Streams[1].Messages[0].Data = []byte(`{"other":1}`)
	partial := call()
	partial.GetAppendMulti().Streams[1].Messages[0] = clientMsg(uid(4), "T", `{}`)
	twice := multiCmd("app", streamPart("c-1", nil, clientMsg(uid(5), "T", `{}`)), streamPart("d-1", nil, clientMsg(uid(5), "T", `{}`)))
	for _, tc := range []struct {
		name string
		cmd  *fsmv1.Command
		msg  string
	}{
		{"other data", changed, `fsm: streams[1].messages[0].id ` + uid(3) + ` was already written to stream "b-1" at position 0 (global position 3) with a different stream, type or data`},
		{"some streams new", partial, `fsm: streams[0].messages[0].id ` + uid(1) + ` was already written to stream "a-1" at position 0 (global position 1) but the append is not that write again: a retry must resend the original append, and new messages need new ids`},
		{"an id in two streams", twice, `fsm: invalid streams[1].messages[0].id: repeats streams[0].messages[0].id ` + uid(5)},
	} {
		err, _ := f.apply(tc.cmd)[0].(error)
		if err == nil || err.Error() != tc.msg {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.msg)
		}
		if tc.name != "an id in two streams" && !errors.Is(err, ErrDuplicateID) {
			t.Errorf("%s: not ErrDuplicateID", tc.name)
		}
	}
	if after := snapshotOf(t, s, "app"); !reflect.DeepEqual(after, before) {
		t.Fatalf("refused or duplicate calls wrote: %+v", after)
	}
	// A single-stream Append retrying one stream's part is a retry too.
	r := member[*fsmv1.AppendResult](f.must(appendAt("app", "b-1", 0, clientMsg(uid(3), "T", `{}`))))
	if !r.Duplicate || r.FirstGlobalPosition != 3 {
		t.Fatalf("append retrying a part: %+v", r)
	}
}

// TestAppendMultiRefusesHardDeletedStream: an AppendMulti naming a
// hard-deleted stream is refused inside apply exactly as an Append to it
// is (ErrStreamDeleted, the same text), whatever the stream's place in the
// call and with or without an expected version, and writes nothing to any
// of its streams. A retry of a call written before the delete is still a
// retry, as for Append. An entry proposed under older input rules replays
// as older binaries applied it (written), so replicas never diverge.
func TestAppendMultiRefusesHardDeletedStream(t *testing.T) {
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("app"))
	f.must(appendCmd("app", "live-1", newMsg("T", `{}`)))
	earlier := func() *fsmv1.Command {
		return multiCmd("app", streamPart("gone-1", nil, clientMsg(uid(1), "T", `{}`)), streamPart("live-1", nil, clientMsg(uid(2), "T", `{}`)))
	}
	orig := member[*fsmv1.AppendMultiResult](f.must(earlier()))
	deletion(t, f.must(deleteStreamCmd("app", "gone-1", true)))
	appendErr, _ := f.apply(appendCmd("app", "gone-1", newMsg("T", `{}`)))[0].(error)
	if !errors.Is(appendErr, ErrStreamDeleted) {
		t.Fatalf("Append to the hard-deleted stream: %v, want ErrStreamDeleted", appendErr)
	}
	before := snapshotOf(t, s, "app")
	for _, tc := range []struct {
		name string
		cmd  *fsmv1.Command
	}{
		{"deleted stream first", multiCmd("app", streamPart("gone-1", nil, newMsg("T", `{}`)), streamPart("live-1", nil, newMsg("T", `{}`)))},
		{"deleted stream last", multiCmd("app", streamPart("live-1", nil, newMsg("T", `{}`)), streamPart("gone-1", nil, newMsg("T", `{}`)))},
		{"deleted stream alone", multiCmd("app", streamPart("gone-1", nil, newMsg("T", `{}`)))},
		{"with its expected version", multiCmd("app", streamPart("gone-1", proto.Int64(0), newMsg("T", `{}`)))},
		{"with new client ids", multiCmd("app", streamPart("gone-1", nil, clientMsg(uid(3), "T", `{}`)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, _ := f.apply(withRules(InputRules, tc.cmd))[0].(error)
			if !errors.Is(err, ErrStreamDeleted) || err.Error() != appendErr.Error() {
				t.Fatalf("got %v, want %q (as Append)", err, appendErr)
			}
			if after := snapshotOf(t, s, "app"); !reflect.DeepEqual(after, before) {
				t.Fatalf("the refused call wrote: %+v", after)
			}
		})
	}
	retry, ok := memberOK[*fsmv1.AppendMultiResult](f.apply(withRules(InputRules, earlier()))[0])
	if !ok || !retry.Duplicate || retry.FirstGlobalPosition != orig.FirstGlobalPosition {
		t.Fatalf("retry of a call written before the delete: %#v, want a duplicate at %d", retry, orig.FirstGlobalPosition)
	}
	old := withRules(InputRulesStrict, multiCmd("app", streamPart("gone-1", nil, newMsg("T", `{}`))))
	res := f.apply(old)[0]
	if r, ok := memberOK[*fsmv1.AppendMultiResult](res); !ok || r.Streams[0].FirstPosition != 1 {
		t.Fatalf("an entry proposed under the rules before: %#v, want it written at position 1 as then", res)
	}
}
