package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// appendN appends n messages of type typ to stream, one call each.
func appendN(t *testing.T, c *client.Client, stream, typ string, n int) {
	t.Helper()
	for i := range n {
		m := client.NewMessage{Type: typ, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
		if _, err := c.Append(ctxT(t), stream, []client.NewMessage{m}); err != nil {
			t.Fatalf("append to %s: %v", stream, err)
		}
	}
}

// positionsOnEveryMember reads stream once per member (reads go round
// robin) with session consistency, and fails unless every member holds
// the same positions; it returns them.
func positionsOnEveryMember(t *testing.T, c *client.Client, stream string, members int) []int64 {
	t.Helper()
	var first []int64
	for i := range members {
		msgs, err := c.ReadStream(ctxT(t), client.StreamQuery{Stream: stream, Limit: -1}, client.WithSession())
		if err != nil {
			t.Fatalf("read %s: %v", stream, err)
		}
		pos := make([]int64, len(msgs))
		for j, m := range msgs {
			pos[j] = m.Position
		}
		if i == 0 {
			first = pos
		} else if fmt.Sprint(pos) != fmt.Sprint(first) {
			t.Fatalf("%s: one member holds positions %v, another %v", stream, first, pos)
		}
	}
	return first
}

// TestRemovals runs each removal and each of its refusals on a 3-node
// cluster, in order (each case starts from the state the previous left),
// and checks what it answers and what every member then holds.
func TestRemovals(t *testing.T) {
	cl := testcluster.Start(t, 3)
	admin := newTestClient(t, cl.Endpoints(), "")
	c := namespaceClient(t, admin, cl.Endpoints(), "removals")
	appendN(t, c, "order-1", "Placed", 5)
	appendN(t, c, "order-2", "A", 2)
	appendN(t, c, "order-2", "B", 2)
	appendN(t, c, "order-3", "A", 2)

	type want struct {
		deleted, version int64 // of DeleteStream / TruncateStream
		streams          int64 // of DeleteByWatermark
		err              error
		stream           string  // then read this stream on every member
		positions        []int64 // and expect these positions
	}
	cases := []struct {
		name string
		call func(context.Context) (client.DeletionResult, client.WatermarkDeletionResult, error)
		want want
	}{
		{"truncate removes below the bound", truncate(c, "order-1", 2),
			want{deleted: 2, version: 4, stream: "order-1", positions: []int64{2, 3, 4}}},
		{"truncate again removes nothing", truncate(c, "order-1", 2),
			want{deleted: 0, version: 4, stream: "order-1", positions: []int64{2, 3, 4}}},
		{"truncate beyond version + 1 is invalid", truncate(c, "order-1", 6), want{err: client.ErrInvalidArgument}},
		{"truncate of a stream never written", truncate(c, "order-9", 1), want{err: client.ErrNotFound}},
		{"delete at the wrong version", deleteStream(c, "order-1", client.ExpectDeleteVersion(3)), want{err: client.ErrWrongExpectedVersion}},
		{"soft delete", deleteStream(c, "order-1", client.ExpectDeleteVersion(4)),
			want{deleted: 3, version: 4, stream: "order-1", positions: []int64{}}},
		{"append after a soft delete continues", appendOne(c, "order-1"),
			want{version: 5, stream: "order-1", positions: []int64{5}}},
		{"hard delete", deleteStream(c, "order-1", client.Hard()),
			want{deleted: 1, version: 5, stream: "order-1", positions: []int64{}}},
		{"append to a tombstone", appendOne(c, "order-1"), want{err: client.ErrStreamDeleted}},
		{"truncate of a tombstone", truncate(c, "order-1", 1), want{err: client.ErrStreamDeleted}},
		{"hard delete again removes nothing", deleteStream(c, "order-1", client.Hard()), want{deleted: 0, version: 5}},
		{"delete of a stream never written", deleteStream(c, "order-9"), want{err: client.ErrNotFound}},
		{"watermark by type", watermark(c, "order", map[string]int64{"order-2": 2}, "A"),
			want{deleted: 2, streams: 1, stream: "order-2", positions: []int64{2, 3}}},
		{"watermark beyond the version", watermark(c, "order", map[string]int64{"order-2": 2, "order-3": 99}),
			want{deleted: 3, streams: 2, stream: "order-3", positions: []int64{}}},
		{"watermark of another category", watermark(c, "order", map[string]int64{"invoice-1": 2}), want{err: client.ErrInvalidArgument}},
		{"watermark with a negative position", watermark(c, "order", map[string]int64{"order-2": -1}), want{err: client.ErrInvalidArgument}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := c.SessionIndex()
			res, wres, err := tc.call(ctxT(t))
			if tc.want.err != nil {
				if !errors.Is(err, tc.want.err) {
					t.Fatalf("got %v, want %v", err, tc.want.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.MessagesDeleted+wres.MessagesDeleted != tc.want.deleted || res.Version != tc.want.version || wres.Streams != tc.want.streams {
				t.Fatalf("got %+v / %+v, want %d deleted, version %d, %d streams", res, wres, tc.want.deleted, tc.want.version, tc.want.streams)
			}
			if idx := max(res.Index, wres.Index); idx <= before || c.SessionIndex() < idx {
				t.Fatalf("index %d: want above the session's %d before, and observed (session %d)", idx, before, c.SessionIndex())
			}
			if tc.want.stream != "" {
				if got := positionsOnEveryMember(t, c, tc.want.stream, len(cl.Nodes)); fmt.Sprint(got) != fmt.Sprint(tc.want.positions) {
					t.Fatalf("%s holds positions %v, want %v", tc.want.stream, got, tc.want.positions)
				}
			}
		})
	}
	var wrong *client.WrongExpectedVersionError
	if _, err := c.DeleteStream(ctxT(t), "order-2", client.ExpectDeleteVersion(0)); !errors.As(err, &wrong) || wrong.Actual != 3 {
		t.Fatalf("delete of order-2 at version 0: %v, want a *WrongExpectedVersionError with actual version 3", err)
	}
}

func truncate(c *client.Client, stream string, before int64) func(context.Context) (client.DeletionResult, client.WatermarkDeletionResult, error) {
	return func(ctx context.Context) (client.DeletionResult, client.WatermarkDeletionResult, error) {
		r, err := c.TruncateStream(ctx, stream, before)
		return r, client.WatermarkDeletionResult{}, err
	}
}

func deleteStream(c *client.Client, stream string, opts ...client.DeleteOption) func(context.Context) (client.DeletionResult, client.WatermarkDeletionResult, error) {
	return func(ctx context.Context) (client.DeletionResult, client.WatermarkDeletionResult, error) {
		r, err := c.DeleteStream(ctx, stream, opts...)
		return r, client.WatermarkDeletionResult{}, err
	}
}

func watermark(c *client.Client, category string, marks map[string]int64, types ...string) func(context.Context) (client.DeletionResult, client.WatermarkDeletionResult, error) {
	return func(ctx context.Context) (client.DeletionResult, client.WatermarkDeletionResult, error) {
		r, err := c.DeleteByWatermark(ctx, category, marks, types...)
		return client.DeletionResult{}, r, err
	}
}

// appendOne appends one message; its position reads as the version.
func appendOne(c *client.Client, stream string) func(context.Context) (client.DeletionResult, client.WatermarkDeletionResult, error) {
	return func(ctx context.Context) (client.DeletionResult, client.WatermarkDeletionResult, error) {
		r, err := c.Append(ctx, stream, []client.NewMessage{event(0)})
		return client.DeletionResult{Version: r.LastPosition, Index: r.Index}, client.WatermarkDeletionResult{}, err
	}
}

// TestRemovalRetries: a removal whose answer is lost is sent again when a
// repeat removes nothing more (truncate, hard delete, soft delete at an
// expected version), and not when it could (a soft delete without one);
// a retry refused after an earlier try may have been applied reports an
// unknown outcome, not the refusal.
func TestRemovalRetries(t *testing.T) {
	cl := testcluster.Start(t, 1)
	token := cl.CreateNamespace(t, "retries", 0)
	plain := newTestClient(t, cl.Endpoints(), token)
	lossy := func(t *testing.T, match string, onLoss func()) (*client.Client, *loseReply) {
		l := &loseReply{next: h2c(), match: match, onLoss: onLoss}
		l.lost.Store(1)
		c, err := client.New(ctxT(t), client.Config{Endpoints: cl.Endpoints(), Token: token, HTTPClient: &http.Client{Transport: l}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, l
	}
	cases := []struct {
		name      string
		match     string
		call      func(c *client.Client, stream string) (client.DeletionResult, error)
		onLoss    func(stream string) // runs between the lost try and the next
		wantErr   error
		wantSent  int32
		wantLeft  []int64 // positions left in the stream
		wantTotal int64   // messages the result reports deleted
	}{
		{name: "truncate is retried", match: "/TruncateStream",
			call: func(c *client.Client, s string) (client.DeletionResult, error) {
				return c.TruncateStream(ctxT(t), s, 2)
			},
			wantSent: 2, wantLeft: []int64{2}, wantTotal: 0},
		{name: "hard delete is retried", match: "/DeleteStream",
			call: func(c *client.Client, s string) (client.DeletionResult, error) {
				return c.DeleteStream(ctxT(t), s, client.Hard())
			},
			wantSent: 2, wantLeft: []int64{}, wantTotal: 0},
		{name: "soft delete at a version is retried", match: "/DeleteStream",
			call: func(c *client.Client, s string) (client.DeletionResult, error) {
				return c.DeleteStream(ctxT(t), s, client.ExpectDeleteVersion(2))
			},
			wantSent: 2, wantLeft: []int64{}, wantTotal: 0},
		{name: "soft delete without a version is not retried", match: "/DeleteStream",
			call:    func(c *client.Client, s string) (client.DeletionResult, error) { return c.DeleteStream(ctxT(t), s) },
			wantErr: client.ErrUnknownOutcome, wantSent: 1, wantLeft: []int64{}},
		{name: "a refused retry is an unknown outcome", match: "/TruncateStream",
			call: func(c *client.Client, s string) (client.DeletionResult, error) {
				return c.TruncateStream(ctxT(t), s, 1)
			},
			onLoss: func(s string) {
				ctx, cancel := context.WithTimeout(context.Background(), testcluster.Timeout)
				defer cancel()
				if _, err := plain.DeleteStream(ctx, s, client.Hard()); err != nil {
					panic(fmt.Sprintf("hard delete between tries: %v", err))
				}
			},
			wantErr: client.ErrUnknownOutcome, wantSent: 2, wantLeft: []int64{}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stream := fmt.Sprintf("order-%d", i)
			appendN(t, plain, stream, "Placed", 3)
			var onLoss func()
			if tc.onLoss != nil {
				onLoss = func() { tc.onLoss(stream) }
			}
			c, l := lossy(t, tc.match, onLoss)
			res, err := tc.call(c, stream)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			case tc.wantErr != nil && (errors.Is(err, client.ErrStreamDeleted) || errors.Is(err, client.ErrInvalidArgument)):
				t.Fatalf("got %v: an unknown outcome must not also read as a refusal", err)
			case tc.wantErr == nil && err != nil:
				t.Fatal(err)
			case tc.wantErr == nil && res.MessagesDeleted != tc.wantTotal:
				t.Fatalf("result %+v: the retry removes nothing more, want %d deleted", res, tc.wantTotal)
			}
			if got := l.appends.Load(); got != tc.wantSent {
				t.Fatalf("%d requests sent, want %d", got, tc.wantSent)
			}
			if got := positionsOnEveryMember(t, plain, stream, 1); fmt.Sprint(got) != fmt.Sprint(tc.wantLeft) {
				t.Fatalf("%s holds positions %v, want %v", stream, got, tc.wantLeft)
			}
		})
	}
}
