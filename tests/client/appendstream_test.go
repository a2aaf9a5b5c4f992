package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// Concurrent Appends go over the member's AppendStreams, each answered
// with its own positions: per stream 0..n-1 once each, and each
// message's id at the position its Append was answered with.
func TestAppendOverStreams(t *testing.T) {
	cl := testcluster.Start(t, 3)
	admin := newTestClient(t, cl.Endpoints(), "")
	ns, err := admin.CreateNamespace(ctxT(t), "streamed", "", "")
	if err != nil {
		t.Fatal(err)
	}
	calls := countCalls(h2c())
	c, err := client.New(ctxT(t), client.Config{Endpoints: cl.Endpoints(), Token: ns.Token, HTTPClient: &http.Client{Transport: calls}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const callers, each, streams = 32, 8, 4
	type written struct {
		stream string
		pos    int64
		id     string
	}
	var (
		mu  sync.Mutex
		got []written
		wg  sync.WaitGroup
	)
	errs := make(chan error, callers*each)
	for i := range callers {
		wg.Go(func() {
			for j := range each {
				stream := fmt.Sprintf("order-%d", (i+j)%streams)
				r, err := c.Append(ctxT(t), stream, []client.NewMessage{event(i*each + j)})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				got = append(got, written{stream, r.FirstPosition, r.IDs[0]})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("append: %v", err)
	}
	// Every append was answered: none was a unary call, so each went
	// over a stream.
	if n := calls.count(skaldv1connect.EventStoreAppendProcedure); n != 0 {
		t.Errorf("%d of %d appends were unary calls, want every one over a stream", n, callers*each)
	}
	if n := calls.count(skaldv1connect.EventStoreAppendStreamProcedure); n < 1 || n > 3*streams {
		t.Errorf("%d AppendStreams opened, want 1..%d (at most %d per member)", n, 3*streams, streams)
	}
	byStream := map[string]map[int64]string{}
	for _, w := range got {
		if byStream[w.stream] == nil {
			byStream[w.stream] = map[int64]string{}
		}
		if prev, dup := byStream[w.stream][w.pos]; dup {
			t.Fatalf("%s position %d answered twice (%s and %s)", w.stream, w.pos, prev, w.id)
		}
		byStream[w.stream][w.pos] = w.id
	}
	for stream, at := range byStream {
		msgs, err := c.ReadStream(ctxT(t), client.StreamQuery{Stream: stream, Limit: -1}, client.WithLinearizable())
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != len(at) {
			t.Fatalf("%s holds %d messages, %d appends were answered", stream, len(msgs), len(at))
		}
		for i, m := range msgs {
			if m.Position != int64(i) || at[m.Position] != m.ID {
				t.Fatalf("%s[%d]: id %s at position %d, the append answered position %d for it", stream, i, m.ID, m.Position, i)
			}
		}
	}
}

// A member that cannot stream gets unary Appends: a server that answers
// AppendStream Unimplemented (an older one), and an HTTP/1.1 transport
// (connect-go refuses bidi streams there).
func TestAppendStreamFallsBack(t *testing.T) {
	cl := testcluster.Start(t, 1)
	target, _ := url.Parse("http://" + cl.Endpoints()[0])
	proxy := httputil.NewSingleHostReverseProxy(target)
	errw := connect.NewErrorWriter()
	old := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == skaldv1connect.EventStoreAppendStreamProcedure {
			_ = errw.Write(w, r, connect.NewError(connect.CodeUnimplemented, errors.New("unknown procedure")))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	old.Config.Protocols = new(http.Protocols)
	old.Config.Protocols.SetHTTP1(true)
	old.Config.Protocols.SetUnencryptedHTTP2(true)
	old.Start()
	defer old.Close()
	http1 := &http.Transport{}
	defer http1.CloseIdleConnections()

	for _, tc := range []struct {
		name     string
		endpoint string
		tr       http.RoundTripper
	}{
		{"server without AppendStream", strings.TrimPrefix(old.URL, "http://"), h2c()},
		{"HTTP/1.1 transport", cl.Endpoints()[0], http1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := countCalls(tc.tr)
			c, err := client.New(ctxT(t), client.Config{Endpoints: []string{tc.endpoint}, Token: testcluster.AdminToken, Pinned: true, HTTPClient: &http.Client{Transport: calls}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			stream := "fallback-" + strings.ReplaceAll(tc.name, " ", "")
			for i := range 3 {
				r, err := c.Append(ctxT(t), stream, []client.NewMessage{event(i)})
				if err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
				if r.FirstPosition != int64(i) {
					t.Fatalf("append %d at position %d", i, r.FirstPosition)
				}
			}
			// Each append was a unary call, and the member was tried with
			// a stream once at most: the first refusal turned streams off
			// for it.
			if n := calls.count(skaldv1connect.EventStoreAppendProcedure); n != 3 {
				t.Errorf("%d unary Append calls, want 3 (none answered over a stream)", n)
			}
			if n := calls.count(skaldv1connect.EventStoreAppendStreamProcedure); n > 1 {
				t.Errorf("%d AppendStreams opened: the member is still tried with streams", n)
			}
		})
	}
}

// Close while appends are in flight on streams: every Append returns,
// and no stream reader or connect call of the client is left running.
func TestAppendStreamClose(t *testing.T) {
	cl := testcluster.Start(t, 3)
	c, err := client.New(ctxT(t), client.Config{Endpoints: cl.Endpoints(), Token: testcluster.AdminToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var wg sync.WaitGroup
	started := make(chan struct{}, 64)
	for i := range 16 {
		wg.Go(func() {
			for j := 0; ctx.Err() == nil; j++ {
				_, err := c.Append(ctx, fmt.Sprintf("close-%d", i), []client.NewMessage{event(j)})
				if err != nil {
					return
				}
				started <- struct{}{}
			}
		})
	}
	for range 32 {
		<-started
	}
	c.Close()
	go func() {
		for range started { // keep callers from blocking on the channel
		}
	}()
	// Close waited for the streams' readers.
	if n := goroutinesIn("skald/client.(*appendStream).read"); n != 0 {
		t.Errorf("%d stream readers still running after Close", n)
	}
	wg.Wait()
	close(started)
	testcluster.WaitFor(t, "no goroutine of the client's streams", func() bool {
		return goroutinesIn("skald/client.(*appendStream)")+goroutinesIn("connect.(*duplexHTTPCall)") == 0
	})

	// Close with every stream idle: net/http's transport is then blocked
	// reading each stream's request body.
	idle, err := client.New(ctxT(t), client.Config{Endpoints: cl.Endpoints(), Token: testcluster.AdminToken})
	if err != nil {
		t.Fatal(err)
	}
	var wg2 sync.WaitGroup
	for i := range 40 {
		wg2.Go(func() {
			if _, err := idle.Append(ctxT(t), fmt.Sprintf("idle-%d", i), []client.NewMessage{event(i)}); err != nil {
				t.Errorf("append %d: %v", i, err)
			}
		})
	}
	wg2.Wait()
	closed := make(chan struct{})
	go func() { idle.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(testcluster.Timeout):
		t.Fatalf("Close of a client with idle streams still waiting after %v", testcluster.Timeout)
	}
	if n := goroutinesIn("skald/client.(*appendStream).read"); n != 0 {
		t.Errorf("%d stream readers still running after Close", n)
	}
}

// goroutinesIn counts the goroutines with frame in their stack (the
// client's stream code, or connect-go's client side of a call).
func goroutinesIn(frame string) int {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, frame) {
			n++
		}
	}
	return n
}
