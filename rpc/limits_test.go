package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node"
)

// limitedServer is NewHandler served as cmd/skald serves it: an
// http.Server configured by Limits behind LimitListener.
type limitedServer struct {
	addr string
	ln   *limitListener
	reg  *prometheus.Registry
}

// serveLimited serves n's API with opts (Limits included) on a new
// loopback listener holding at most maxConns connections.
func serveLimited(t testing.TB, n *node.Node, opts Options, maxConns int) *limitedServer {
	t.Helper()
	return serveCapped(t, n, opts, maxConns, 0)
}

// serveCapped is serveLimited with at most perIP connections from one
// remote address.
func serveCapped(t testing.TB, n *node.Node, opts Options, maxConns, perIP int) *limitedServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	capped, err := LimitListener(ln, maxConns, perIP, reg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Registerer, opts.Gatherer = reg, reg
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: NewHandler(n, opts), Protocols: p}
	opts.Limits.Configure(srv)
	go srv.Serve(capped)
	t.Cleanup(func() { srv.Close() })
	return &limitedServer{addr: ln.Addr().String(), ln: capped.(*limitListener), reg: reg}
}

// rawRequest opens a connection and sends a request's head: the body, of
// contentLength bytes, is for the caller to send (or not).
func rawRequest(t *testing.T, addr, path, contentType, token string, contentLength int64) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n", path, addr, contentType, contentLength)
	if contentType == "application/json" && strings.HasPrefix(path, "/skald.") {
		head += "Connect-Protocol-Version: 1\r\n"
	}
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAuthBeforeBody is finding 5: a Connect call without a valid token is
// refused from its headers, before its body is read. Each request
// announces 15 MB and sends 1 KiB: the reply can only come if the server
// did not wait for the rest (before the fix, connect-go read and buffered
// the body first, and these requests hung). A body over the request cap
// is refused the same way, whatever the token.
func TestAuthBeforeBody(t *testing.T) {
	t.Parallel()
	s := single(t)
	ls := serveLimited(t, s.n, defaultOptions, 0)
	const announced = 15_000_000
	const unknownToken = "ns_bm9wZQ_0000000000000000000000000000000000000000000000000000000000000000" // namespace "nope"
	const wrongSecret = "ns_ZGVmYXVsdA_1111111111111111111111111111111111111111111111111111111111111111"
	chunk := strings.Repeat(" ", 1024)

	for _, c := range []struct {
		name, contentType, token string
		length                   int64
		status                   int    // HTTP status
		grpcStatus               string // gRPC-Web: the grpc-status header
	}{
		{"connect, no token", "application/json", "", announced, http.StatusUnauthorized, ""},
		{"connect, unknown namespace", "application/json", unknownToken, announced, http.StatusUnauthorized, ""},
		{"connect, wrong secret", "application/json", wrongSecret, announced, http.StatusUnauthorized, ""},
		{"connect, malformed token", "application/proto", "ns_nope", announced, http.StatusUnauthorized, ""},
		{"grpc-web, no token", "application/grpc-web+proto", "", announced, http.StatusOK, "16"},
		{"connect, admin token, body over the cap", "application/json", adminToken, 20 << 20, http.StatusTooManyRequests, ""},
		{"grpc-web, admin token, body over the cap", "application/grpc-web+proto", adminToken, 20 << 20, http.StatusOK, "8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := rawRequest(t, ls.addr, "/skald.v1.EventStore/Append", c.contentType, c.token, c.length)
			if _, err := io.WriteString(conn, chunk); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(waitTimeout))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no reply while 1 KiB of %d bytes was sent: %v", c.length, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status || resp.Header.Get("Grpc-Status") != c.grpcStatus {
				t.Fatalf("reply %d, grpc-status %q (%s); want %d, %q", resp.StatusCode, resp.Header.Get("Grpc-Status"), body, c.status, c.grpcStatus)
			}
			if !resp.Close {
				t.Fatal("the connection stays open with an unread body behind the reply")
			}
		})
	}

	t.Run("grpc over h2c, no token", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		go func() { pw.Write([]byte(chunk)) }() // then nothing: the body never ends
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+ls.addr+"/skald.v1.EventStore/Append", pr)
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		resp, err := h2c().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.ReadAll(resp.Body)
		status := resp.Header.Get("Grpc-Status")
		if status == "" {
			status = resp.Trailer.Get("Grpc-Status")
		}
		if status != "16" {
			t.Fatalf("grpc-status %q, want 16 (unauthenticated)", status)
		}
	})

	t.Run("a valid token is served", func(t *testing.T) {
		c := newClients(&server{n: s.n, addr: ls.addr}, protocols[0], adminToken)
		_, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "auth-1", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}}))
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestReadTimeoutCutsTrickle is finding 2's load: a body trickled a byte
// at a time is cut off at the read timeout, on every kind of route. The
// test counts the bytes sent before the server hung up: at one byte per
// 100 ms and a 1 s read timeout that is about 10; without a read timeout
// the client gets to 100 and the test fails.
func TestReadTimeoutCutsTrickle(t *testing.T) {
	t.Parallel()
	s := single(t)
	opts := defaultOptions
	opts.Limits = Limits{ReadTimeout: time.Second}
	ls := serveLimited(t, s.n, opts, 0)
	for _, c := range []struct{ name, path, contentType string }{
		{"Connect Append", "/skald.v1.EventStore/Append", "application/json"},
		{"EventoDB /rpc", "/rpc", "application/json"},
		{"EventoDB /import", "/import", "application/x-ndjson"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := rawRequest(t, ls.addr, c.path, c.contentType, adminToken, 16_000_000)
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				io.Copy(io.Discard, conn) // until the server hangs up
			}()
			sent := 0
			for sent < 100 {
				select {
				case <-closed:
					if sent > 40 {
						t.Fatalf("cut off after %d bytes, want about 10", sent)
					}
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := conn.Write([]byte(" ")); err != nil {
					return // reset: cut off
				}
				sent++
			}
			t.Fatalf("still reading the body after %d bytes at a byte per 100 ms (read timeout 1 s)", sent)
		})
	}
	t.Run("gRPC over h2c", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		var sent atomic.Int64
		go func() {
			// An envelope announcing a 1 MB message, then its bytes one
			// at a time.
			if _, err := pw.Write([]byte{0, 0, 0x0f, 0x42, 0x40}); err != nil {
				return
			}
			for sent.Load() < 100 {
				time.Sleep(100 * time.Millisecond)
				if _, err := pw.Write([]byte{0}); err != nil {
					return
				}
				sent.Add(1)
			}
		}()
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+ls.addr+"/skald.v1.EventStore/Append", pr)
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := h2c().Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if n := sent.Load(); n >= 40 {
			t.Fatalf("the stream was still read after %d bytes at a byte per 100 ms (read timeout 1 s)", n)
		}
	})
}

// TestStreamsOutliveReadTimeout checks the exception: a Subscribe and an
// EventoDB /subscribe stay open long past the read timeout (measured in
// Subscribe's own heartbeats, 200 ms apart) and still deliver.
func TestStreamsOutliveReadTimeout(t *testing.T) {
	t.Parallel()
	s := single(t)
	opts := defaultOptions
	opts.Limits = Limits{ReadTimeout: time.Second}
	ls := serveLimited(t, s.n, opts, 0)
	ctx := ctxT(t)

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ls.addr+"/subscribe?stream=late-1&token="+adminToken, nil)
	sse, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sse.Body.Close()
	pokes := bufio.NewReader(sse.Body)

	c := newClients(&server{n: s.n, addr: ls.addr}, protocols[0], adminToken)
	stream, err := c.events.Subscribe(ctx, connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Stream{Stream: "late-1"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	start := time.Now()
	for beats := 0; beats < 15 || time.Since(start) < 3*time.Second; {
		if !stream.Receive() {
			t.Fatalf("stream ended after %d heartbeats (%s): %v", beats, time.Since(start), stream.Err())
		}
		if stream.Msg().GetHeartbeat() != nil {
			beats++
		}
	}
	if _, err := c.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: "late-1", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}})); err != nil {
		t.Fatal(err)
	}
	for stream.Receive() && stream.Msg().GetMessage() == nil {
	}
	if m := stream.Msg().GetMessage(); m == nil || m.Stream != "late-1" {
		t.Fatalf("no message after %s: %v", time.Since(start), stream.Err())
	}
	for {
		line, err := pokes.ReadString('\n')
		if err != nil {
			t.Fatalf("/subscribe ended after %s: %v", time.Since(start), err)
		}
		if strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, `"stream":"late-1"`) {
				t.Fatalf("poke %q", line)
			}
			return
		}
	}
}

// TestConnectionCap checks --max-connections: past the cap a connection
// is closed at once and counted, the ones open are served, and a slot
// freed is used again.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	s := single(t)
	ls := serveLimited(t, s.n, defaultOptions, 2)
	get := func(c net.Conn) error {
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(waitTimeout))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ls.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	held := []net.Conn{dial(), dial()}
	for i, c := range held {
		if err := get(c); err != nil {
			t.Fatalf("connection %d under the cap: %v", i, err)
		}
	}
	for i := 0; i < 3; i++ {
		// The listener accepts and closes at once: the close may even
		// reach the dial (connection reset), which refuses it too.
		c, err := net.Dial("tcp", ls.addr)
		if err != nil {
			continue
		}
		t.Cleanup(func() { c.Close() })
		if err := get(c); err == nil {
			t.Fatalf("connection %d past the cap was served", i+3)
		}
	}
	var m dto.Metric
	if err := ls.ln.refused.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 3 {
		t.Fatalf("skald_rpc_connections_refused_total = %v, want 3", got)
	}
	if got := ls.ln.Open(); got != 2 {
		t.Fatalf("%d connections open, want 2", got)
	}
	held[0].Close()
	testutil.Eventually(t, waitTimeout, "the closed connection's slot to be freed", func() bool { return ls.ln.Open() == 1 })
	if err := get(dial()); err != nil {
		t.Fatalf("a freed slot: %v", err)
	}
}

// TestWriteTimeoutCutsStalledReader: a client that stops reading a reply
// is cut off at the write timeout (from the request's start for a unary
// reply, per write for a streamed one or a download), so what the reply
// holds is freed; a Subscribe stream, which has no write deadline, stays.
func TestWriteTimeoutCutsStalledReader(t *testing.T) {
	t.Parallel()
	s := single(t)
	ev := evClient{t: t, addr: s.addr, token: adminToken}
	data := map[string]any{"x": strings.Repeat("a", 100<<10)}
	for i := range 20 {
		ev.ok(nil, "stream.write", fmt.Sprintf("wide-%d", i%2), map[string]any{"type": "T", "data": data})
	}
	opts := defaultOptions
	opts.Limits = Limits{WriteTimeout: time.Second}
	addr, blocked := serveStalled(t, s, 10, opts)
	c := newClients(&server{n: s.n, addr: addr}, protocols[1], adminToken)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stalled := func(start func()) *stallConn {
		go start()
		select {
		case c := <-blocked:
			return c
		case <-time.After(waitTimeout):
			t.Fatal("the request did not stall")
			return nil
		}
	}
	sub := stalled(func() {
		if st, err := c.events.Subscribe(ctx, connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Category{Category: "wide"}})); err == nil {
			<-ctx.Done()
			st.Close()
		}
	})
	post := func(path, body string) func() {
		return func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+adminToken)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				<-ctx.Done()
				resp.Body.Close()
			}
		}
	}
	for _, r := range []struct {
		name  string
		start func()
	}{
		{"Connect ReadAll", func() { c.events.ReadAll(ctx, connect.NewRequest(&skaldv1.ReadAllRequest{Limit: -1})) }},
		{"EventoDB category.get 1000", post("/rpc", `["category.get","wide",{"batchSize":1000}]`)},
		{"EventoDB category.get -1", post("/rpc", `["category.get","wide",{"batchSize":-1}]`)},
		{"backup", func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/admin/backup", nil)
			req.Header.Set("Authorization", "Bearer "+adminToken)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				<-ctx.Done()
				resp.Body.Close()
			}
		}},
	} {
		t.Run(r.name, func(t *testing.T) {
			conn := stalled(r.start)
			select {
			case <-conn.closed:
			case <-time.After(waitTimeout):
				t.Fatal("a reader that stopped reading was not cut off")
			}
		})
	}
	select {
	case <-sub.closed:
		t.Fatal("the stalled Subscribe stream was cut off: streams have no write deadline")
	default:
	}
}

// TestImportOutlivesReadTimeout: /import's read deadline moves on with
// every MiB received, so an import that streams steadily may take longer
// than the read timeout (here 4 MiB over about 1.5 s, with a 1 s one).
// The body is made before the clock starts: building it under -race on a
// loaded machine took longer than sending it (300-600 ms per 256 KiB),
// and the import was cut off for the test's own slowness. The server's
// time parsing what it read is not charged to the client (progressBody),
// so only the pace of the writes below counts: a MiB per 360 ms against
// a 1 s deadline.
func TestImportOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	s := single(t)
	opts := defaultOptions
	opts.Limits = Limits{ReadTimeout: time.Second}
	ls := serveLimited(t, s.n, opts, 0)
	const records = 1000
	var chunks []string
	var chunk strings.Builder
	pad := strings.Repeat("p", 4000)
	for i := range records {
		fmt.Fprintf(&chunk, `{"id":"00000000-0000-4000-8000-%012d","stream":"imp-1","type":"T","pos":%d,"gpos":%d,"data":{"p":%q},"meta":null,"time":"2025-01-15T10:00:00Z"}`+"\n",
			i, i, i+1, pad)
		if chunk.Len() >= 256<<10 || i == records-1 {
			chunks = append(chunks, chunk.String())
			chunk.Reset()
		}
	}
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		start := time.Now()
		for _, c := range chunks {
			// 256 KiB every 90 ms: a MiB per 360 ms.
			time.Sleep(time.Until(start.Add(90 * time.Millisecond)))
			start = time.Now()
			if _, err := io.WriteString(pw, c); err != nil {
				return
			}
		}
	}()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+ls.addr+"/import", pr)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/x-ndjson")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"done":true`) || !strings.Contains(string(body), fmt.Sprintf(`"imported":%d}`, records)) {
		t.Fatalf("import over %s: %s", time.Since(start), body)
	}
	if elapsed := time.Since(start); elapsed < time.Second {
		t.Fatalf("the import took %s, not longer than the read timeout: the test proves nothing", elapsed)
	}
}

// TestImportReadErrors: a body that stops in the middle of a line, by
// stalling past the read timeout or by ending before its Content-Length,
// is a READ_ERROR saying so at the line it was cut in, not an INVALID_JSON
// on the half line the server held (bufio.Scanner hands it over as if the
// body had ended). The whole lines before it are imported.
func TestImportReadErrors(t *testing.T) {
	t.Parallel()
	s := single(t)
	opts := defaultOptions
	opts.Limits = Limits{ReadTimeout: 300 * time.Millisecond}
	ls := serveLimited(t, s.n, opts, 0)
	const whole = 3
	body := importBody(whole + 1)
	cut := bytes.LastIndexByte(body[:len(body)-1], '\n') + 20 // 20 bytes into the last line
	for _, c := range []struct {
		name string
		end  func(conn net.Conn) // after the body's first cut bytes
		want string              // in the message
	}{
		{"stalls past the read timeout", func(net.Conn) {}, "less than 1 MiB arrived within the read timeout (300ms)"},
		{"ends early", func(conn net.Conn) { conn.(*net.TCPConn).CloseWrite() }, "request body ended early"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := rawRequest(t, ls.addr, "/import", "application/x-ndjson", adminToken, int64(len(body)))
			if _, err := conn.Write(body[:cut]); err != nil {
				t.Fatal(err)
			}
			c.end(conn)
			conn.SetReadDeadline(time.Now().Add(waitTimeout))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			reply, _ := io.ReadAll(resp.Body)
			var last map[string]any
			for line := range strings.Lines(string(reply)) {
				if ev, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
					last = nil
					if err := json.Unmarshal([]byte(ev), &last); err != nil {
						t.Fatalf("event %q: %v", ev, err)
					}
				}
			}
			msg, _ := last["message"].(string)
			if last["error"] != "READ_ERROR" || last["line"] != float64(whole+1) || !strings.Contains(msg, c.want) {
				t.Fatalf("import cut in line %d: %s; want READ_ERROR at line %d saying %q", whole+1, reply, whole+1, c.want)
			}
		})
	}
}

// TestImportDeadlineSparesServerTime: the time the /import handler spends
// away from the body (parsing, replicating a chunk: here it stops reading
// for twice the read timeout, as a slow Raft commit under load does) is
// not charged to the client, whose body was all sent at once. Before,
// the read after the pause failed with the deadline set at the request's
// start.
func TestImportDeadlineSparesServerTime(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	const size = 512 << 10 // under importDeadlineStep: only the away time moves the deadline
	result := make(chan string, 1)
	h := deadlines{limits: Limits{ReadTimeout: timeout}.withDefaults(), next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := make([]byte, 64<<10)
		n, err := io.ReadFull(r.Body, first)
		if err != nil {
			result <- fmt.Sprintf("first read: %v", err)
			return
		}
		time.Sleep(2 * timeout) // the server's own work, not a wait for the client
		rest, err := io.ReadAll(r.Body)
		result <- fmt.Sprintf("%d bytes, %v", n+len(rest), err)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	Limits{ReadTimeout: timeout}.Configure(srv)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	conn := rawRequest(t, ln.Addr().String(), "/import", "application/x-ndjson", "", size)
	go conn.Write(make([]byte, size))
	select {
	case got := <-result:
		if want := fmt.Sprintf("%d bytes, <nil>", size); got != want {
			t.Fatalf("body read: %s, want %s", got, want)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the handler never finished reading")
	}
}
