package client

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/anypb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/internal/testcluster"
)

// Concurrent Appends go over the member's AppendStreams, each answered
// with its own positions: per stream 0..n-1 once each, and each
// message's id at the position its Append was answered with.
func TestAppendOverStreams(t *testing.T) {
	cl := testcluster.Start(t, 3)
	admin := newTestClient(t, cl.Endpoints(), "")
	c := namespaceClient(t, admin, cl.Endpoints(), "streamed")
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
				r, err := c.Append(ctxT(t), stream, []NewMessage{event(i*each + j)})
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
	if n := c.streamed.Load(); n != callers*each {
		t.Errorf("%d of %d appends went over a stream", n, callers*each)
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
		msgs, err := c.ReadStream(ctxT(t), StreamQuery{Stream: stream, Limit: -1}, WithLinearizable())
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
	http1 := &http.Client{Transport: &http.Transport{}}
	defer http1.CloseIdleConnections()

	for _, tc := range []struct {
		name     string
		endpoint string
		hc       *http.Client
	}{
		{"server without AppendStream", strings.TrimPrefix(old.URL, "http://"), nil},
		{"HTTP/1.1 transport", cl.Endpoints()[0], http1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(ctxT(t), Config{Endpoints: []string{tc.endpoint}, Token: testcluster.AdminToken, Pinned: true, HTTPClient: tc.hc})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			stream := "fallback-" + strings.ReplaceAll(tc.name, " ", "")
			for i := range 3 {
				r, err := c.Append(ctxT(t), stream, []NewMessage{event(i)})
				if err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
				if r.FirstPosition != int64(i) {
					t.Fatalf("append %d at position %d", i, r.FirstPosition)
				}
			}
			if n := c.streamed.Load(); n != 0 {
				t.Errorf("%d appends answered over a stream, want 0", n)
			}
			p := c.poolOf(c.view.pick(true, map[*member]bool{}))
			p.mu.Lock()
			off := p.off
			p.mu.Unlock()
			if !off {
				t.Error("the member is still tried with streams")
			}
		})
	}
}

// Close while appends are in flight on streams: every Append returns,
// and no stream reader or connect call of the client is left running.
func TestAppendStreamClose(t *testing.T) {
	cl := testcluster.Start(t, 3)
	c, err := New(ctxT(t), Config{Endpoints: cl.Endpoints(), Token: testcluster.AdminToken})
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
				_, err := c.Append(ctx, fmt.Sprintf("close-%d", i), []NewMessage{event(j)})
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
	idle, err := New(ctxT(t), Config{Endpoints: cl.Endpoints(), Token: testcluster.AdminToken})
	if err != nil {
		t.Fatal(err)
	}
	var wg2 sync.WaitGroup
	for i := range 40 {
		wg2.Go(func() {
			if _, err := idle.Append(ctxT(t), fmt.Sprintf("idle-%d", i), []NewMessage{event(i)}); err != nil {
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

// What an append's error on a stream means to the retry loop: the
// server's answers as the unary call's, a stream that broke after it
// served as unknown, one the server never served as not sent on it.
func TestStreamErrorsClassify(t *testing.T) {
	detail, _ := anypb.New(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "stream", Description: "empty"}}})
	broken := func(answered bool, cause error) error {
		s := &appendStream{pool: &appendPool{m: &member{url: "http://n1"}}, answered: answered, err: cause}
		return s.endError()
	}
	for _, tc := range []struct {
		name string
		err  error
		want verdict
	}{
		{"invalid argument", streamedError(&skaldv1.AppendStreamError{Code: "invalid_argument", Message: "stream: empty", Details: []*anypb.Any{detail}}, ""), final},
		{"aborted", streamedError(&skaldv1.AppendStreamError{Code: "aborted", Message: "expected version"}, ""), final},
		{"unavailable, not applied", streamedError(&skaldv1.AppendStreamError{Code: "unavailable", Message: "node: no leader", NotApplied: true}, ""), refused},
		{"unavailable", streamedError(&skaldv1.AppendStreamError{Code: "unavailable", Message: "the write may or may not have been applied"}, ""), unknown},
		{"deadline, not applied", streamedError(&skaldv1.AppendStreamError{Code: "deadline_exceeded", NotApplied: true}, ""), refused},
		{"stream reset after answers", broken(true, connect.NewError(connect.CodeUnavailable, io.ErrUnexpectedEOF)), unknown},
		{"stream ended by the server, revoked", broken(true, connect.NewWireError(connect.CodeUnauthenticated, errors.New("revoked"))), final},
		{"stream ended by the server, idle", broken(true, connect.NewWireError(connect.CodeUnavailable, errors.New("i/o timeout"))), refused},
		{"stream refused at its opening", broken(false, connect.NewWireError(connect.CodePermissionDenied, errors.New("reader"))), final},
		{"stream ended Unimplemented after answers", broken(true, connect.NewError(connect.CodeUnimplemented, errors.New("x"))), unknown},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("%s: %v classified %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	for _, cause := range []error{connect.NewError(connect.CodeUnimplemented, errors.New("HTTP/1.1")), connect.NewError(connect.CodeUnknown, errors.New("HTTP status 505 HTTP Version Not Supported"))} {
		if err := broken(false, cause); !errors.Is(err, errNoStream) {
			t.Errorf("%v before any answer: %v, want errNoStream", cause, err)
		}
	}
	e := streamedError(&skaldv1.AppendStreamError{Code: "invalid_argument", Message: "stream: empty", Details: []*anypb.Any{detail}}, "n2:8080")
	var ce *connect.Error
	if !errors.As(e, &ce) || ce.Message() != "stream: empty" || len(ce.Details()) != 1 || ce.Meta().Get(leaderHeader) != "n2:8080" || !connect.IsWireError(e) {
		t.Errorf("rebuilt error %v: message %q, %d details, leader %q", e, ce.Message(), len(ce.Details()), ce.Meta().Get(leaderHeader))
	}
}
