package rpc

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Idempotent writes (issue #18) through both APIs, on the leader and
// through a follower (whose forwarded rejections must keep every field).
func TestIdempotentWrites(t *testing.T) {
	t.Parallel()
	for _, target := range []struct {
		name  string
		start func(testing.TB) *server
	}{{"single", single}, {"follower", followerOfThree}} {
		t.Run(target.name, func(t *testing.T) {
			s := target.start(t)
			t.Run("connect", func(t *testing.T) { idempotentConnect(t, s) })
			t.Run("eventodb", func(t *testing.T) { idempotentEventoDB(t, s) })
		})
	}
}

func idempotentConnect(t *testing.T, s *server) {
	p := protocols[1] // connect-proto
	admin := newClients(s, p, adminToken)
	create := func(name string, window *durationpb.Duration, forever bool) (*skaldv1.NamespaceInfo, clients, error) {
		res, err := admin.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: name, DedupeWindow: window, DedupeForever: forever}))
		if err != nil {
			return nil, clients{}, err
		}
		info, err := admin.namespaces.Get(ctxT(t), connect.NewRequest(&skaldv1.GetRequest{Name: name}))
		if err != nil {
			t.Fatal(err)
		}
		return info.Msg, newClients(s, p, res.Msg.Token), nil
	}

	t.Run("namespace options", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			window  *durationpb.Duration
			forever bool
			// wantWindow and wantForever are what Get reports.
			wantWindow  time.Duration
			wantForever bool
			field       string // InvalidArgument on this field
		}{
			{name: "dd-default", wantWindow: 2 * time.Minute},
			{name: "dd-off", window: durationpb.New(0)},
			{name: "dd-10s", window: durationpb.New(10 * time.Second), wantWindow: 10 * time.Second},
			{name: "dd-forever", forever: true, wantForever: true},
			{name: "dd-short", window: durationpb.New(500 * time.Millisecond), field: "dedupe_window"},
			{name: "dd-negative", window: durationpb.New(-time.Second), field: "dedupe_window"},
			{name: "dd-both", window: durationpb.New(time.Minute), forever: true, field: "dedupe_window"},
		} {
			info, _, err := create(tc.name, tc.window, tc.forever)
			if tc.field != "" {
				wantField(t, tc.name, err, tc.field)
				if _, gerr := admin.namespaces.Get(ctxT(t), connect.NewRequest(&skaldv1.GetRequest{Name: tc.name})); connect.CodeOf(gerr) != connect.CodeNotFound {
					t.Fatalf("%s: refused create left a namespace (%v)", tc.name, gerr)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if info.DedupeWindow.AsDuration() != tc.wantWindow || info.DedupeForever != tc.wantForever {
				t.Fatalf("%s: window %v forever %v, want %v %v", tc.name, info.DedupeWindow.AsDuration(), info.DedupeForever, tc.wantWindow, tc.wantForever)
			}
		}
	})

	_, c, err := create("dd-app", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	const a, b = "0192f0c4-0000-7000-8000-00000000000a", "0192f0c4-0000-7000-8000-00000000000b"
	req := func(stream string, msgs ...*skaldv1.NewMessage) *connect.Request[skaldv1.AppendRequest] {
		return connect.NewRequest(&skaldv1.AppendRequest{Stream: stream, Messages: msgs})
	}
	msgA := func(data string) *skaldv1.NewMessage {
		return &skaldv1.NewMessage{Id: a, Type: "Opened", Data: []byte(data)}
	}
	msgB := &skaldv1.NewMessage{Id: "0192F0C4-0000-7000-8000-00000000000B", Type: "Moved", Data: []byte(`{"b":1}`)} // upper case: same id
	first, err := c.events.Append(ctxT(t), req("acct-1", msgA(`{"a":1}`), msgB))
	if err != nil {
		t.Fatal(err)
	}
	if first.Msg.Duplicate {
		t.Fatalf("first append says duplicate: %+v", first.Msg)
	}
	stream := func() []*skaldv1.Message {
		rs, err := c.events.ReadStream(ctxT(t), connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "acct-1"}))
		if err != nil {
			t.Fatal(err)
		}
		return rs.Msg.Messages
	}
	before := stream()

	t.Run("retry", func(t *testing.T) {
		retry := req("acct-1", msgA(`{"a":1}`), msgB)
		retry.Msg.ExpectedVersion = proto.Int64(-1) // right for the original
		got, err := c.events.Append(ctxT(t), retry)
		if err != nil {
			t.Fatal(err)
		}
		want := proto.Clone(first.Msg).(*skaldv1.AppendResponse)
		want.Duplicate, want.Index = true, got.Msg.Index
		if !proto.Equal(got.Msg, want) || got.Msg.Index < first.Msg.Index {
			t.Fatalf("retry answered %+v, want %+v", got.Msg, want)
		}
	})
	for _, tc := range []struct {
		name   string
		req    *connect.Request[skaldv1.AppendRequest]
		detail *skaldv1.DuplicateMessageId
		msg    string
	}{
		{"other data", req("acct-1", msgA(`{"a":2}`), msgB),
			&skaldv1.DuplicateMessageId{Message: 0, Id: a, Stream: "acct-1", Position: 0, GlobalPosition: 1, Reason: "content"},
			`messages[0].id ` + a + ` was already written to stream "acct-1" at position 0 (global position 1) with a different stream, type or data`},
		{"other stream", req("acct-2", msgA(`{"a":1}`)),
			&skaldv1.DuplicateMessageId{Message: 0, Id: a, Stream: "acct-1", Position: 0, GlobalPosition: 1, Reason: "content"}, ""},
		{"mixed", req("acct-1", msgB, &skaldv1.NewMessage{Type: "New", Data: []byte(`{}`)}),
			&skaldv1.DuplicateMessageId{Message: 0, Id: b, Stream: "acct-1", Position: 1, GlobalPosition: 2, Reason: "mixed"},
			`messages[0].id ` + b + ` was already written to stream "acct-1" at position 1 (global position 2) but the append is not that write again: a retry must resend the original append, and new messages need new ids`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.events.Append(ctxT(t), tc.req)
			ce := wantCode(t, tc.name, err, connect.CodeAlreadyExists)
			if tc.msg != "" && ce.Message() != tc.msg {
				t.Fatalf("message %q, want %q", ce.Message(), tc.msg)
			}
			var got *skaldv1.DuplicateMessageId
			for _, d := range ce.Details() {
				if v, derr := d.Value(); derr == nil {
					got, _ = v.(*skaldv1.DuplicateMessageId)
				}
			}
			if !proto.Equal(got, tc.detail) {
				t.Fatalf("detail %v, want %v", got, tc.detail)
			}
			if after := stream(); !reflect.DeepEqual(after, before) {
				t.Fatalf("stream changed: %v", after)
			}
		})
	}
	t.Run("ids of two earlier appends", func(t *testing.T) {
		const x1, x2, y1 = "0192f0c4-0000-7000-8000-0000000000c1", "0192f0c4-0000-7000-8000-0000000000c2", "0192f0c4-0000-7000-8000-0000000000d1"
		m := func(id string) *skaldv1.NewMessage {
			return &skaldv1.NewMessage{Id: id, Type: "T", Data: []byte(`{"id":"` + id + `"}`)}
		}
		for _, r := range []*connect.Request[skaldv1.AppendRequest]{req("i-1", m(x1), m(x2)), req("i-1", m(y1))} {
			if _, err := c.events.Append(ctxT(t), r); err != nil {
				t.Fatal(err)
			}
		}
		// Side by side in the stream, but not one earlier append.
		_, err := c.events.Append(ctxT(t), req("i-1", m(x2), m(y1)))
		ce := wantCode(t, "ids of two appends", err, connect.CodeAlreadyExists)
		var got *skaldv1.DuplicateMessageId
		for _, d := range ce.Details() {
			if v, derr := d.Value(); derr == nil {
				got, _ = v.(*skaldv1.DuplicateMessageId)
			}
		}
		if want := (&skaldv1.DuplicateMessageId{Message: 1, Id: y1, Stream: "i-1", Position: 2, GlobalPosition: got.GetGlobalPosition(), Reason: "mixed"}); !proto.Equal(got, want) {
			t.Fatalf("detail %v, want %v", got, want)
		}
		v, err := c.events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "i-1"}))
		if err != nil || v.Msg.Version != 2 {
			t.Fatalf("version after the refusal: %v, %v; want 2", v, err)
		}
	})
	t.Run("same id twice in one append", func(t *testing.T) {
		_, err := c.events.Append(ctxT(t), req("acct-3", msgA(`{"a":1}`), msgA(`{"a":1}`)))
		wantField(t, "id twice", err, "messages[1].id")
	})
	t.Run("no ids and dedupe off keep writing", func(t *testing.T) {
		for range 2 {
			r, err := c.events.Append(ctxT(t), req("acct-4", &skaldv1.NewMessage{Type: "T", Data: []byte(`{}`)}))
			if err != nil || r.Msg.Duplicate {
				t.Fatalf("append without id: %v %v", r, err)
			}
		}
		_, off, err := create("dd-off-app", durationpb.New(0), false)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			r, err := off.events.Append(ctxT(t), req("s-1", msgA(`{"a":1}`)))
			if err != nil || r.Msg.Duplicate || r.Msg.FirstPosition != int64(i) {
				t.Fatalf("dedupe off, write %d: %v %v", i, r, err)
			}
		}
	})
}

func idempotentEventoDB(t *testing.T, s *server) {
	admin := evClient{t, s.addr, adminToken}
	var created struct{ Token string }
	admin.ok(&created, "ns.create", "dd-evdb", map[string]any{})
	c := evClient{t, s.addr, created.Token}
	const id = "0192f0c4-0000-7000-8000-0000000000e1"
	msg := map[string]any{"type": "Opened", "data": map[string]any{"a": 1}}
	var first, again map[string]int64
	c.ok(&first, "stream.write", "acct-1", map[string]any{"type": "First", "data": map[string]any{}}, map[string]any{})
	c.ok(&first, "stream.write", "acct-1", msg, map[string]any{"id": id})
	// The retry's reply is the original's, in the unchanged format, even
	// with an expected version the write itself made stale.
	c.ok(&again, "stream.write", "acct-1", msg, map[string]any{"id": id, "expectedVersion": 0})
	if !reflect.DeepEqual(again, first) || first["position"] != 1 {
		t.Fatalf("retry answered %v, first %v", again, first)
	}
	status, body := c.call("stream.write", "acct-1", map[string]any{"type": "Opened", "data": map[string]any{"a": 2}}, map[string]any{"id": id})
	checkEvError(t, "other data", status, body, http.StatusConflict, "DUPLICATE_MESSAGE_ID")
	var e struct {
		Error struct {
			Message string
			Details map[string]any
		}
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatal(err)
	}
	wantDetails := map[string]any{"id": id, "stream": "acct-1", "position": 1.0, "globalPosition": 2.0, "reason": "content"}
	if !reflect.DeepEqual(e.Error.Details, wantDetails) ||
		e.Error.Message != `messages[0].id `+id+` was already written to stream "acct-1" at position 1 (global position 2) with a different stream, type or data` {
		t.Fatalf("error %+v", e.Error)
	}
	var msgs []json.RawMessage
	c.ok(&msgs, "stream.get", "acct-1")
	if len(msgs) != 2 {
		t.Fatalf("stream holds %d messages, want 2", len(msgs))
	}
}
