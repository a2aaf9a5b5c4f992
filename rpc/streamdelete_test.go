package rpc

import (
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// TestStreamDeletionAPI drives DeleteStream and TruncateStream and their
// EventoDB extensions through a follower (so every reply also crosses the
// peer service), with each refusal's code.
func TestStreamDeletionAPI(t *testing.T) {
	t.Parallel()
	f := followerOfThree(t)
	c := newClients(f, protocols[0], adminToken)
	ctx := ctxT(t)
	appendN := func(stream string, n int) {
		msgs := make([]*skaldv1.NewMessage, n)
		for i := range msgs {
			msgs[i] = &skaldv1.NewMessage{Type: "T", Data: []byte(`{}`)}
		}
		if _, err := c.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: stream, Messages: msgs})); err != nil {
			t.Fatal(err)
		}
	}
	appendN("acct-1", 5)
	appendN("acct-2", 3)
	appendN("acct-3", 2)

	tr, err := c.events.TruncateStream(ctx, connect.NewRequest(&skaldv1.TruncateStreamRequest{Stream: "acct-1", Before: 3}))
	if err != nil || tr.Msg.MessagesDeleted != 3 || tr.Msg.Version != 4 || tr.Msg.Index == 0 {
		t.Fatalf("truncate: %+v, %v", tr, err)
	}
	// The reply's index makes the follower's own session read see it.
	rs, err := c.events.ReadStream(ctx, connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "acct-1",
		Read: &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_SESSION, MinIndex: tr.Msg.Index}}))
	if err != nil || len(rs.Msg.Messages) != 2 || rs.Msg.Messages[0].Position != 3 {
		t.Fatalf("read after truncate: %v, %v", rs, err)
	}
	del, err := c.events.DeleteStream(ctx, connect.NewRequest(&skaldv1.DeleteStreamRequest{Stream: "acct-2", Hard: true}))
	if err != nil || del.Msg.MessagesDeleted != 3 || del.Msg.Version != 2 {
		t.Fatalf("hard delete: %+v, %v", del, err)
	}
	five, minus2 := int64(5), int64(-2)
	refusals := []struct {
		name string
		call func() error
		code connect.Code
	}{
		{"append to a hard-deleted stream", func() error {
			_, err := c.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: "acct-2", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}}))
			return err
		}, connect.CodeFailedPrecondition},
		{"truncate of a hard-deleted stream", func() error {
			_, err := c.events.TruncateStream(ctx, connect.NewRequest(&skaldv1.TruncateStreamRequest{Stream: "acct-2"}))
			return err
		}, connect.CodeFailedPrecondition},
		{"delete of a stream that never had a message", func() error {
			_, err := c.events.DeleteStream(ctx, connect.NewRequest(&skaldv1.DeleteStreamRequest{Stream: "acct-9"}))
			return err
		}, connect.CodeNotFound},
		{"delete with the wrong expected version", func() error {
			_, err := c.events.DeleteStream(ctx, connect.NewRequest(&skaldv1.DeleteStreamRequest{Stream: "acct-3", ExpectedVersion: &five}))
			return err
		}, connect.CodeAborted},
		{"delete with an expected version below -1", func() error {
			_, err := c.events.DeleteStream(ctx, connect.NewRequest(&skaldv1.DeleteStreamRequest{Stream: "acct-3", ExpectedVersion: &minus2}))
			return err
		}, connect.CodeInvalidArgument},
		{"truncate beyond the version", func() error {
			_, err := c.events.TruncateStream(ctx, connect.NewRequest(&skaldv1.TruncateStreamRequest{Stream: "acct-3", Before: 3}))
			return err
		}, connect.CodeInvalidArgument},
		{"truncate with a negative position", func() error {
			_, err := c.events.TruncateStream(ctx, connect.NewRequest(&skaldv1.TruncateStreamRequest{Stream: "acct-3", Before: -1}))
			return err
		}, connect.CodeInvalidArgument},
	}
	for _, r := range refusals {
		wantCode(t, r.name, r.call(), r.code)
	}
	ns, err := c.namespaces.Get(ctx, connect.NewRequest(&skaldv1.GetRequest{Name: "default"}))
	if err != nil || ns.Msg.MessageCount != 4 || ns.Msg.StreamCount != 2 {
		t.Fatalf("namespace counts after the deletes: %+v, %v; want 4 messages in 2 streams", ns, err)
	}

	// StreamVersion tells a tombstone from a soft-deleted or live stream.
	appendN("acct-5", 2)
	if _, err := c.events.DeleteStream(ctx, connect.NewRequest(&skaldv1.DeleteStreamRequest{Stream: "acct-5"})); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		stream  string
		version int64
		hard    bool
	}{{"acct-2", 2, true}, {"acct-5", 1, false}, {"acct-1", 4, false}, {"acct-9", -1, false}} {
		v, err := c.events.StreamVersion(ctx, connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: tc.stream}))
		if err != nil || v.Msg.Version != tc.version || v.Msg.HardDeleted != tc.hard {
			t.Errorf("StreamVersion(%s) = %+v, %v; want version %d, hard_deleted %v", tc.stream, v, err, tc.version, tc.hard)
		}
	}

	appendN("wm-1", 4)
	appendN("wm-2", 4)
	wm, err := c.events.DeleteByWatermark(ctx, connect.NewRequest(&skaldv1.DeleteByWatermarkRequest{Category: "wm",
		Watermarks: map[string]int64{"wm-2": 1, "wm-1": 2, "wm-9": 5}}))
	if err != nil || wm.Msg.MessagesDeleted != 5 || wm.Msg.Streams != 2 {
		t.Fatalf("DeleteByWatermark: %+v, %v; want 5 removed in 2 streams", wm, err)
	}
	_, err = c.events.DeleteByWatermark(ctx, connect.NewRequest(&skaldv1.DeleteByWatermarkRequest{Category: "wm", Watermarks: map[string]int64{"acct-1": 1}}))
	wantField(t, "watermark of a stream in another category", err, "watermarks[0].stream")
	_, err = c.events.DeleteByWatermark(ctx, connect.NewRequest(&skaldv1.DeleteByWatermarkRequest{Category: "wm-1", Watermarks: map[string]int64{"wm-1": 1}}))
	wantField(t, "a stream name as the category", err, "category")

	ev := evClient{t, f.addr, adminToken}
	var wout struct{ MessagesDeleted, Streams int64 }
	ev.ok(&wout, "category.deleteByWatermark", "wm", map[string]any{"watermarks": map[string]any{"wm-1": 3, "wm-2": 3}, "types": []string{"T"}})
	if wout.MessagesDeleted != 3 || wout.Streams != 2 {
		t.Fatalf("category.deleteByWatermark: %+v, want 3 removed in 2 streams", wout)
	}
	ev.fails(400, "INVALID_REQUEST", "category.deleteByWatermark", "wm", map[string]any{})
	ev.fails(400, "INVALID_REQUEST", "category.deleteByWatermark", "wm", map[string]any{"watermarks": map[string]any{"x-1": 1}})
	var out struct{ MessagesDeleted, Version int64 }
	ev.ok(&out, "stream.truncate", "acct-3", map[string]any{"before": 1})
	if out.MessagesDeleted != 1 || out.Version != 1 {
		t.Fatalf("stream.truncate: %+v", out)
	}
	ev.ok(&out, "stream.delete", "acct-3", map[string]any{})
	if out.MessagesDeleted != 1 || out.Version != 1 {
		t.Fatalf("stream.delete: %+v", out)
	}
	ev.fails(410, "STREAM_DELETED", "stream.write", "acct-2", map[string]any{"type": "T", "data": map[string]any{}})
	ev.fails(404, "STREAM_NOT_FOUND", "stream.delete", "acct-9")
	ev.fails(400, "INVALID_REQUEST", "stream.truncate", "acct-1")
	ev.fails(400, "INVALID_REQUEST", "stream.delete", "acct-1", map[string]any{"hard": "yes"})
}
