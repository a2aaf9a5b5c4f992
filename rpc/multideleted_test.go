package rpc

import (
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// TestAppendMultiToHardDeletedStream: after DeleteStream hard, AppendMulti
// naming the stream is refused exactly as Append is (the same code and
// message on every protocol), through a follower, and writes nothing.
func TestAppendMultiToHardDeletedStream(t *testing.T) {
	t.Parallel()
	f := followerOfThree(t)
	admin := newClients(f, protocols[0], adminToken)
	ctx := ctxT(t)
	one := func() []*skaldv1.NewMessage { return []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}} }
	for _, s := range []string{"gone-1", "live-1"} {
		if _, err := admin.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: s, Messages: one()})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.events.DeleteStream(ctx, connect.NewRequest(&skaldv1.DeleteStreamRequest{Stream: "gone-1", Hard: true})); err != nil {
		t.Fatal(err)
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := newClients(f, p, adminToken)
			_, err := c.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: "gone-1", Messages: one()}))
			appendErr := wantCode(t, "Append to the hard-deleted stream", err, connect.CodeFailedPrecondition)
			_, err = c.events.AppendMulti(ctx, connect.NewRequest(&skaldv1.AppendMultiRequest{Streams: []*skaldv1.StreamAppend{
				{Stream: "live-1", Messages: one()}, {Stream: "gone-1", Messages: one()}}}))
			multiErr := wantCode(t, "AppendMulti naming the hard-deleted stream", err, connect.CodeFailedPrecondition)
			if multiErr.Message() != appendErr.Message() {
				t.Fatalf("AppendMulti says %q, Append %q", multiErr.Message(), appendErr.Message())
			}
		})
	}
	for _, s := range []string{"gone-1", "live-1"} {
		v, err := admin.events.StreamVersion(ctx, connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: s}))
		if err != nil || v.Msg.Version != 0 {
			t.Fatalf("version of %s after the refusals: %v, %v; want 0 (nothing written)", s, v, err)
		}
	}
}
