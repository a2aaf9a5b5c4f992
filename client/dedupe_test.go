package client

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skalddb/skald/client/internal/testcluster"
)

// loseReply sends every request, but loses the answer of the first lost
// Appends: the write reached the server and was applied, the client cannot
// know (an unknown outcome, as when a connection breaks after sending).
type loseReply struct {
	next    http.RoundTripper
	lost    atomic.Int32 // replies still to lose
	appends atomic.Int32 // Append requests sent
}

func (l *loseReply) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/Append") {
		return resp, err
	}
	l.appends.Add(1)
	if l.lost.Add(-1) < 0 {
		return resp, nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errors.New("test: connection reset after the request was sent")
}

func lossyClient(t *testing.T, cl *testcluster.Cluster, token string, lose int32) (*Client, *loseReply) {
	t.Helper()
	l := &loseReply{next: newHTTPClient(Config{DialTimeout: time.Second}).Transport}
	l.lost.Store(lose)
	c, err := New(ctxT(t), Config{Endpoints: cl.Endpoints(), Token: token, HTTPClient: &http.Client{Transport: l}})
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
		if _, err := c.Append(ctx, "orders-1", []NewMessage{event(0)}); err != nil {
			t.Fatal(err)
		}
		l.lost.Store(2)
		res, err := c.Append(ctx, "orders-1", []NewMessage{event(1), event(2)})
		if err != nil {
			t.Fatalf("append with lost replies: %v", err)
		}
		if got := l.appends.Load(); got != 3+1 {
			t.Fatalf("%d Append requests, want 4 (one, then one sent three times)", got)
		}
		if !res.Duplicate || res.FirstPosition != 1 || res.LastPosition != 2 || res.FirstGlobalPosition != 2 {
			t.Fatalf("result %+v, want the original positions 1..2 marked duplicate", res)
		}
		got, err := c.ReadStream(ctx, StreamQuery{Stream: "orders-1", Limit: -1})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[1].ID != res.IDs[0] || got[2].ID != res.IDs[1] {
			t.Fatalf("stream holds %+v", got)
		}
	})
	t.Run("dedupe off is not retried", func(t *testing.T) {
		c, l := lossyClient(t, cl, cl.CreateNamespace(t, "dedupe-off", -1), 1)
		_, err := c.Append(ctx, "orders-1", []NewMessage{event(0)})
		if !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("append with a lost reply: %v, want ErrUnknownOutcome", err)
		}
		if got := l.appends.Load(); got != 1 {
			t.Fatalf("%d Append requests, want 1", got)
		}
		if got, err := c.ReadStream(ctx, StreamQuery{Stream: "orders-1", Limit: -1}); err != nil || len(got) != 1 {
			t.Fatalf("stream holds %v (%v), want the one applied message", got, err)
		}
	})
	t.Run("other content is refused", func(t *testing.T) {
		c := newTestClient(t, cl.Endpoints(), cl.CreateNamespace(t, "dedupe-clash", 0))
		m := event(0)
		m.ID = "0192f0c4-0000-7000-8000-0000000000d1"
		if _, err := c.Append(ctx, "orders-1", []NewMessage{m}); err != nil {
			t.Fatal(err)
		}
		m.Data = []byte(`{"n":99}`)
		if _, err := c.Append(ctx, "orders-1", []NewMessage{m}); !errors.Is(err, ErrAlreadyExists) {
			t.Fatalf("same id, other data: %v, want ErrAlreadyExists", err)
		}
	})
}
