package client_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// loseReply sends every request, but loses the answers of the next `lost`
// calls whose path contains match ("/Append" when empty: Append and
// AppendMulti): the write reached the server and was applied, the client
// cannot know (an unknown outcome, as when a connection breaks after
// sending). onLoss, when set, runs after each lost answer, before the
// client sees the loss.
type loseReply struct {
	next    http.RoundTripper
	match   string
	onLoss  func()
	lost    atomic.Int32 // replies still to lose
	appends atomic.Int32 // matching requests sent
}

func (l *loseReply) RoundTrip(req *http.Request) (*http.Response, error) {
	match := l.match
	if match == "" {
		match = "/Append"
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil || !strings.Contains(req.URL.Path, match) {
		return resp, err
	}
	l.appends.Add(1)
	if l.lost.Add(-1) < 0 {
		return resp, nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if l.onLoss != nil {
		l.onLoss()
	}
	return nil, errors.New("test: connection reset after the request was sent")
}

func lossyClient(t *testing.T, cl *testcluster.Cluster, token string, lose int32) (*client.Client, *loseReply) {
	t.Helper()
	l := &loseReply{next: h2c()}
	l.lost.Store(lose)
	// Unary calls: loseReply loses whole HTTP exchanges (a stream broken
	// mid-way is TestStreamErrorsClassify's).
	c, err := client.New(ctxT(t), client.Config{Endpoints: cl.Endpoints(), Token: token, HTTPClient: &http.Client{Transport: l}, AppendStreams: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, l
}

// TestRetriedAppendLandsOnce: an append whose answer is lost is sent again
// with the same ids; the server recognises them, so the messages are in
// the stream once and the client gets their original positions.
func TestRetriedAppendLandsOnce(t *testing.T) {
	cl := testcluster.Start(t, 1)
	ctx := ctxT(t)

	t.Run("default window", func(t *testing.T) {
		c, l := lossyClient(t, cl, cl.CreateNamespace(t, "dedupe-default", 0), 0)
		if _, err := c.Append(ctx, "orders-1", []client.NewMessage{event(0)}); err != nil {
			t.Fatal(err)
		}
		l.lost.Store(2)
		res, err := c.Append(ctx, "orders-1", []client.NewMessage{event(1), event(2)})
		if err != nil {
			t.Fatalf("append with lost replies: %v", err)
		}
		if got := l.appends.Load(); got != 3+1 {
			t.Fatalf("%d Append requests, want 4 (one, then one sent three times)", got)
		}
		if !res.Duplicate || res.FirstPosition != 1 || res.LastPosition != 2 || res.FirstGlobalPosition != 2 {
			t.Fatalf("result %+v, want the original positions 1..2 marked duplicate", res)
		}
		got, err := c.ReadStream(ctx, client.StreamQuery{Stream: "orders-1", Limit: -1})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[1].ID != res.IDs[0] || got[2].ID != res.IDs[1] {
			t.Fatalf("stream holds %+v", got)
		}
	})
	t.Run("dedupe off is not retried", func(t *testing.T) {
		c, l := lossyClient(t, cl, cl.CreateNamespace(t, "dedupe-off", -1), 1)
		_, err := c.Append(ctx, "orders-1", []client.NewMessage{event(0)})
		if !errors.Is(err, client.ErrUnknownOutcome) {
			t.Fatalf("append with a lost reply: %v, want ErrUnknownOutcome", err)
		}
		if got := l.appends.Load(); got != 1 {
			t.Fatalf("%d Append requests, want 1", got)
		}
		if got, err := c.ReadStream(ctx, client.StreamQuery{Stream: "orders-1", Limit: -1}); err != nil || len(got) != 1 {
			t.Fatalf("stream holds %v (%v), want the one applied message", got, err)
		}
	})
	t.Run("other content is refused", func(t *testing.T) {
		c := newTestClient(t, cl.Endpoints(), cl.CreateNamespace(t, "dedupe-clash", 0))
		m := event(0)
		m.ID = "0192f0c4-0000-7000-8000-0000000000d1"
		if _, err := c.Append(ctx, "orders-1", []client.NewMessage{m}); err != nil {
			t.Fatal(err)
		}
		m.Data = []byte(`{"n":99}`)
		if _, err := c.Append(ctx, "orders-1", []client.NewMessage{m}); !errors.Is(err, client.ErrAlreadyExists) {
			t.Fatalf("same id, other data: %v, want ErrAlreadyExists", err)
		}
	})
}

// TestAppendMulti: several streams at once, contiguous global positions;
// a lost answer is retried and lands once; conflicts name every stream.
func TestAppendMulti(t *testing.T) {
	cl := testcluster.Start(t, 1)
	ctx := ctxT(t)
	c, l := lossyClient(t, cl, cl.CreateNamespace(t, "multi", 0), 1)
	none := int64(-1)
	res, err := c.AppendMulti(ctx, []client.StreamAppend{
		{Stream: "orders-1", Messages: []client.NewMessage{event(0), event(1)}, ExpectedVersion: &none},
		{Stream: "orders-2", Messages: []client.NewMessage{event(2)}},
	})
	if err != nil {
		t.Fatalf("append-multi with a lost answer: %v", err)
	}
	if l.appends.Load() != 2 || !res.Duplicate || res.FirstGlobalPosition != 1 || res.LastGlobalPosition != 3 ||
		res.Streams[0].LastPosition != 1 || res.Streams[1].FirstGlobalPosition != 3 || len(res.Streams[0].IDs) != 2 {
		t.Fatalf("%d requests, result %+v", l.appends.Load(), res)
	}
	stale := int64(0)
	_, err = c.AppendMulti(ctx, []client.StreamAppend{
		{Stream: "orders-1", Messages: []client.NewMessage{event(3)}, ExpectedVersion: &stale},
		{Stream: "orders-3", Messages: []client.NewMessage{event(4)}, ExpectedVersion: &stale},
	})
	var w *client.WrongExpectedVersionsError
	if !errors.Is(err, client.ErrWrongExpectedVersion) || !errors.As(err, &w) || len(w.Conflicts) != 2 ||
		w.Conflicts[0] != (client.WrongExpectedVersionError{Stream: "orders-1", Expected: 0, Actual: 1}) || w.Conflicts[1].Actual != -1 {
		t.Fatalf("conflicts: %v", err)
	}
	got, err := c.ReadCategory(ctx, client.CategoryQuery{Category: "orders"})
	if err != nil || len(got) != 3 {
		t.Fatalf("category holds %v (%v), want 3 messages", got, err)
	}
}
