package rpc

import (
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

func TestAppendMulti(t *testing.T) {
	t.Parallel()
	for _, target := range []struct {
		name  string
		start func(testing.TB) *server
	}{{"single", single}, {"follower", followerOfThree}} {
		t.Run(target.name, func(t *testing.T) { appendMultiSuite(t, target.start(t)) })
	}
}

func appendMultiSuite(t *testing.T, s *server) {
	p := protocols[1]
	admin := newClients(s, p, adminToken)
	created, err := admin.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: "multi"}))
	if err != nil {
		t.Fatal(err)
	}
	c := newClients(s, p, created.Msg.Token)
	msg := func(id, data string) *skaldv1.NewMessage {
		return &skaldv1.NewMessage{Id: id, Type: "T", Data: []byte(data)}
	}
	part := func(stream string, exp *int64, msgs ...*skaldv1.NewMessage) *skaldv1.StreamAppend {
		return &skaldv1.StreamAppend{Stream: stream, ExpectedVersion: exp, Messages: msgs}
	}
	call := func(parts ...*skaldv1.StreamAppend) (*skaldv1.AppendMultiResponse, error) {
		r, err := c.events.AppendMulti(ctxT(t), connect.NewRequest(&skaldv1.AppendMultiRequest{Streams: parts}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	}
	if _, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "a-1", Messages: []*skaldv1.NewMessage{msg("", `{}`)}})); err != nil {
		t.Fatal(err)
	}
	const x, y = "0192f0c4-0000-7000-8000-0000000000a1", "0192f0c4-0000-7000-8000-0000000000a2"
	orig := func() []*skaldv1.StreamAppend {
		return []*skaldv1.StreamAppend{part("a-1", proto.Int64(0), msg(x, `{"n":1}`)), part("b-1", proto.Int64(-1), msg(y, `{"n":2}`), msg("", `{}`))}
	}
	first, err := call(orig()...)
	if err != nil {
		t.Fatal(err)
	}
	want := &skaldv1.AppendMultiResponse{Streams: []*skaldv1.StreamAppendResult{
		{Stream: "a-1", FirstPosition: 1, LastPosition: 1, FirstGlobalPosition: 2, LastGlobalPosition: 2},
		{Stream: "b-1", FirstPosition: 0, LastPosition: 1, FirstGlobalPosition: 3, LastGlobalPosition: 4},
	}, FirstGlobalPosition: 2, LastGlobalPosition: 4, Index: first.Index}
	if !proto.Equal(first, want) {
		t.Fatalf("append-multi answered %v, want %v", first, want)
	}
	all := func() int {
		r, err := c.events.ReadAll(ctxT(t), connect.NewRequest(&skaldv1.ReadAllRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Msg.Messages)
	}
	if n := all(); n != 4 {
		t.Fatalf("namespace holds %d messages, want 4", n)
	}

	t.Run("conflicts name every stream", func(t *testing.T) {
		_, err := call(part("a-1", proto.Int64(7), msg("", `{}`)), part("b-1", proto.Int64(1), msg("", `{}`)), part("c-1", proto.Int64(0), msg("", `{}`)))
		ce := wantCode(t, "conflicts", err, connect.CodeAborted)
		if want := `expected versions do not match: stream "a-1" is at version 1, expected 7; stream "c-1" is at version -1, expected 0`; ce.Message() != want {
			t.Fatalf("message %q, want %q", ce.Message(), want)
		}
		var got *skaldv1.VersionConflicts
		for _, d := range ce.Details() {
			if v, derr := d.Value(); derr == nil {
				got, _ = v.(*skaldv1.VersionConflicts)
			}
		}
		wantD := &skaldv1.VersionConflicts{Conflicts: []*skaldv1.VersionConflict{{Stream: "a-1", ExpectedVersion: 7, ActualVersion: 1}, {Stream: "c-1", ExpectedVersion: 0, ActualVersion: -1}}}
		if !proto.Equal(got, wantD) {
			t.Fatalf("detail %v, want %v", got, wantD)
		}
	})
	t.Run("retry", func(t *testing.T) {
		// Every message of the call remembered, each stream's in order: a
		// retry (here of the messages that had ids).
		r, err := call(orig()[0], part("b-1", proto.Int64(-1), msg(y, `{"n":2}`)))
		if err != nil || !r.Duplicate || r.Streams[0].FirstGlobalPosition != 2 || r.Streams[1].FirstGlobalPosition != 3 || r.LastGlobalPosition != 3 {
			t.Fatalf("retry: %v %v", r, err)
		}
		// A remembered stream beside a new one is refused whole.
		_, err = call(orig()[0], part("c-1", nil, msg("", `{}`)))
		ce := wantCode(t, "mixed", err, connect.CodeAlreadyExists)
		var d *skaldv1.DuplicateMessageId
		for _, dd := range ce.Details() {
			if v, derr := dd.Value(); derr == nil {
				d, _ = v.(*skaldv1.DuplicateMessageId)
			}
		}
		wantD := &skaldv1.DuplicateMessageId{Field: "streams[0].messages[0]", Id: x, Stream: "a-1", Position: 1, GlobalPosition: 2, Reason: "mixed"}
		if !proto.Equal(d, wantD) {
			t.Fatalf("detail %v, want %v", d, wantD)
		}
	})
	big := strings.Repeat("x", 1<<20-16)
	nine := make([]*skaldv1.StreamAppend, 9)
	for i := range nine {
		nine[i] = part(fmt.Sprintf("big-%d", i), nil, msg("", `{"x":"`+big+`"}`))
	}
	many := make([]*skaldv1.StreamAppend, 101)
	for i := range many {
		many[i] = part(fmt.Sprintf("m-%d", i), nil, msg("", `{}`))
	}
	thousand := make([]*skaldv1.NewMessage, 600)
	for i := range thousand {
		thousand[i] = msg("", `{}`)
	}
	for _, tc := range []struct {
		name  string
		parts []*skaldv1.StreamAppend
		field string
	}{
		{"no streams", nil, "streams"},
		{"too many streams", many, "streams"},
		{"a stream twice", []*skaldv1.StreamAppend{part("a-1", nil, msg("", `{}`)), part("a-1", nil, msg("", `{}`))}, "streams[1].stream"},
		{"empty stream name", []*skaldv1.StreamAppend{part("", nil, msg("", `{}`))}, "streams[0].stream"},
		{"no messages", []*skaldv1.StreamAppend{part("a-1", nil)}, "streams[0].messages"},
		{"bad id", []*skaldv1.StreamAppend{part("a-1", nil, msg("nope", `{}`))}, "streams[0].messages[0].id"},
		{"bad data", []*skaldv1.StreamAppend{part("a-1", nil, msg("", `{}`)), part("b-1", nil, msg("", `1`))}, "streams[1].messages[0].data"},
		{"bad expected version", []*skaldv1.StreamAppend{part("a-1", proto.Int64(-5), msg("", `{}`))}, "streams[0].expected_version"},
		{"too many messages", []*skaldv1.StreamAppend{part("a-1", nil, thousand...), part("b-1", nil, thousand...)}, "streams"},
		{"too many bytes", nine, "streams"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(tc.parts...)
			wantField(t, tc.name, err, tc.field)
		})
	}
	if n := all(); n != 4 {
		t.Fatalf("refused calls wrote: the namespace holds %d messages, want 4", n)
	}
}
