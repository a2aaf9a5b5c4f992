package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

func appendTo(t *testing.T, c clients, stream string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: stream, Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}})); err != nil {
			t.Fatal(err)
		}
	}
}

// collect receives until caught_up and returns the messages before it.
func collect(t *testing.T, st *connect.ServerStreamForClient[skaldv1.SubscribeResponse]) []*skaldv1.Message {
	t.Helper()
	var out []*skaldv1.Message
	for st.Receive() {
		switch ev := st.Msg().Event.(type) {
		case *skaldv1.SubscribeResponse_Message:
			out = append(out, ev.Message)
		case *skaldv1.SubscribeResponse_CaughtUp:
			return out
		}
	}
	t.Fatalf("stream ended before caught_up: %v", st.Err())
	return nil
}

func TestSubscribeConsumerGroupsSplitStreams(t *testing.T) {
	t.Parallel()
	s := single(t)
	c := newClients(s, protocols[1], adminToken)
	for i := 0; i < 12; i++ {
		appendTo(t, c, fmt.Sprintf("order-%d", i), 2)
	}
	appendTo(t, c, "order", 1) // no id: no member
	owner := map[string]int64{}
	total := 0
	for m := int64(0); m < 4; m++ {
		st, err := c.events.Subscribe(ctxT(t), connect.NewRequest(&skaldv1.SubscribeRequest{
			Target: &skaldv1.SubscribeRequest_Category{Category: "order"}, ConsumerGroup: &skaldv1.ConsumerGroup{Member: m, Size: 4},
		}))
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range collect(t, st) {
			if prev, ok := owner[msg.Stream]; ok && prev != m {
				t.Fatalf("stream %s delivered to members %d and %d", msg.Stream, prev, m)
			}
			owner[msg.Stream] = m
			total++
		}
		st.Close()
	}
	if len(owner) != 12 || total != 24 {
		t.Fatalf("members covered %d streams with %d messages, want 12 and 24", len(owner), total)
	}
	if _, ok := owner["order"]; ok {
		t.Fatal("stream without an id was delivered to a member")
	}
	for stream, m := range owner {
		if want := fsm.ConsumerGroupMember(stream, 4); want != m {
			t.Fatalf("stream %s went to member %d, the md5 rule says %d", stream, m, want)
		}
	}
}

func TestSubscribeHeartbeatAndDelete(t *testing.T) {
	t.Parallel()
	s := single(t)
	admin := newClients(s, protocols[1], adminToken)
	created, err := admin.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: "gone"}))
	if err != nil {
		t.Fatal(err)
	}
	c := newClients(s, protocols[2], created.Msg.Token) // gRPC
	st, err := c.events.Subscribe(ctxT(t), connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_All{All: true}}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	collect(t, st)
	// The harness sends heartbeats after 200 ms of silence.
	if !st.Receive() || st.Msg().GetHeartbeat() == nil {
		t.Fatalf("want a heartbeat after silence, got %v %v", st.Msg(), st.Err())
	}
	if _, err := admin.namespaces.Delete(ctxT(t), connect.NewRequest(&skaldv1.DeleteRequest{Name: "gone"})); err != nil {
		t.Fatal(err)
	}
	for st.Receive() {
		if st.Msg().GetHeartbeat() == nil {
			t.Fatalf("unexpected event after delete: %v", st.Msg())
		}
	}
	if code := connect.CodeOf(st.Err()); code != connect.CodeNotFound {
		t.Fatalf("subscription to a deleted namespace ended with %v, want not_found", st.Err())
	}
}

func TestSubscribeCutsOffSlowConsumer(t *testing.T) {
	t.Parallel()
	s := singleWith(t, Options{Subscribe: subscribeConfig{MaxLag: 50, Page: 10}})
	c := newClients(s, protocols[1], adminToken)
	st, err := c.events.Subscribe(ctxT(t), connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Stream{Stream: "fast-1"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	collect(t, st)
	// The subscriber reads nothing while 200 messages arrive in 2 appends.
	for i := 0; i < 2; i++ {
		msgs := make([]*skaldv1.NewMessage, 100)
		for j := range msgs {
			msgs[j] = &skaldv1.NewMessage{Type: "T", Data: []byte(`{}`)}
		}
		if _, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "fast-1", Messages: msgs})); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for st.Receive() {
		if st.Msg().GetMessage() != nil {
			got++
		}
	}
	if code := connect.CodeOf(st.Err()); code != connect.CodeResourceExhausted || got >= 200 {
		t.Fatalf("slow consumer got %d messages and ended with %v, want resource_exhausted before the end", got, st.Err())
	}
}

func TestHTTPEndpoints(t *testing.T) {
	t.Parallel()
	s := single(t)
	get := func(path, token string, header ...string) (int, string) {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, "http://"+s.addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cases := []struct {
		path, token string
		code        int
		contains    string
	}{
		{"/healthz", "", 200, "ok"},
		{"/readyz", "", 200, "ready"},
		{"/metrics", "", 200, "skald_raft_state"},
		{"/debug/pprof/", "", 401, "admin token required"},
		{"/debug/pprof/", adminToken, 200, "goroutine"},
		{"/nope", "", 404, ""},
	}
	for _, c := range cases {
		code, body := get(c.path, c.token)
		if code != c.code || !strings.Contains(body, c.contains) {
			t.Errorf("GET %s: %d %q, want %d containing %q", c.path, code, body[:min(len(body), 80)], c.code, c.contains)
		}
	}
	// RPC metrics count calls by procedure and code.
	newClients(s, protocols[1], "").events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "s"}))
	if _, body := get("/metrics", ""); !strings.Contains(body, `skald_rpc_requests_total{code="unauthenticated",procedure="/skald.v1.EventStore/StreamVersion"} 1`) {
		t.Error("rpc metrics missing the unauthenticated call")
	}
	// Reflection lists the services (what grpcurl and buf curl use).
	rc := grpcreflect.NewClient(h2c(), "http://"+s.addr)
	stream := rc.NewStream(ctxT(t))
	defer stream.Close()
	names, err := stream.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"skald.v1.EventStore": false, "skald.v1.Namespaces": false, "skald.v1.Cluster": false, "grpc.health.v1.Health": false}
	for _, n := range names {
		if _, ok := want[string(n)]; ok {
			want[string(n)] = true
		}
	}
	for n, ok := range want {
		if !ok {
			t.Errorf("reflection does not list %s (got %v)", n, names)
		}
	}
}

func TestCORS(t *testing.T) {
	t.Parallel()
	s := singleWith(t, Options{CORSOrigins: []string{"http://app.example"}})
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodOptions, "http://"+s.addr+"/skald.v1.EventStore/Append", nil)
	req.Header.Set("Origin", "http://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,connect-protocol-version,content-type")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "http://app.example" {
		t.Fatalf("preflight Allow-Origin %q (status %d)", got, resp.StatusCode)
	}
	req.Header.Set("Origin", "http://evil.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Fatalf("preflight from an unlisted origin allowed: %q", got)
	}
}

func TestSessionReadBeyondCommitted(t *testing.T) {
	t.Parallel()
	s := single(t)
	c := newClients(s, protocols[1], adminToken)
	req := func() *connect.Request[skaldv1.StreamVersionRequest] {
		return connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "s",
			Read: &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_SESSION, MinIndex: 1 << 40}})
	}
	// No acknowledged write can have given it: refused at once, not
	// waited for until the read wait runs out.
	_, err := c.events.StreamVersion(ctxT(t), req())
	wantCode(t, "min_index beyond anything committed", err, connect.CodeInvalidArgument)
	if !strings.Contains(err.Error(), "read.min_index: 1099511627776 is past the cluster's commit index") {
		t.Fatalf("min_index beyond anything committed: %v", err)
	}
}

// TestSubscribeCORS: /subscribe answers browsers as every other path
// does, by --cors-origins, not with Allow-Origin "*" for every origin.
func TestSubscribeCORS(t *testing.T) {
	t.Parallel()
	s := singleWith(t, Options{CORSOrigins: []string{"http://app.example"}})
	allowed := func(origin string) string {
		ctx, cancel := context.WithCancel(ctxT(t))
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+"/subscribe?stream=s-1", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("subscribe from %s: status %d", origin, resp.StatusCode)
		}
		return resp.Header.Get("Access-Control-Allow-Origin")
	}
	if got := allowed("http://app.example"); got != "http://app.example" {
		t.Errorf("subscribe from the listed origin: Allow-Origin %q", got)
	}
	if got := allowed("http://evil.example"); got != "" {
		t.Errorf("subscribe from an unlisted origin: Allow-Origin %q", got)
	}
}

// A subscriber to a quiet category in a busy namespace is not behind.
func TestSubscribeQuietCategoryInBusyNamespace(t *testing.T) {
	t.Parallel()
	s := singleWith(t, Options{Subscribe: subscribeConfig{MaxLag: 50, Page: 10}})
	c := newClients(s, protocols[1], adminToken)
	msgs := make([]*skaldv1.NewMessage, 200)
	for i := range msgs {
		msgs[i] = &skaldv1.NewMessage{Type: "T", Data: []byte(`{}`)}
	}
	if _, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "busy-1", Messages: msgs})); err != nil {
		t.Fatal(err)
	}
	st, err := c.events.Subscribe(ctxT(t), connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Category{Category: "quiet"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := collect(t, st); len(got) != 0 {
		t.Fatalf("catch-up of an empty category: %d messages", len(got))
	}
	appendTo(t, c, "busy-1", 100) // more traffic elsewhere
	appendTo(t, c, "quiet-1", 1)
	for st.Receive() {
		if m := st.Msg().GetMessage(); m != nil {
			if m.Stream != "quiet-1" {
				t.Fatalf("got %s", m.Stream)
			}
			return
		}
	}
	t.Fatalf("quiet-category subscriber cut off: %v", st.Err())
}

// TestReadyNeedsAdminNamespace: a node with a leader and caught up is not
// ready until it holds the admin namespace, so the admin token works the
// moment /readyz first says yes.
func TestReadyNeedsAdminNamespace(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	testutil.Eventually(t, waitTimeout, "leadership", s.n.IsLeader)
	ready := func() (int, string) {
		resp, err := http.Get("http://" + s.addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := ready(); code != http.StatusServiceUnavailable || !strings.Contains(body, "admin namespace") {
		t.Fatalf("/readyz without the admin namespace: %d %q", code, body)
	}
	createAdmin(t, s.n)
	if code, body := ready(); code != http.StatusOK {
		t.Fatalf("/readyz with the admin namespace: %d %q", code, body)
	}
}

// TestNamespacesGetReplyIsTheResource: over Connect JSON, Get answers the
// NamespaceInfo fields at the top level (the spec's shape), not wrapped
// in {"namespace": ...}.
func TestNamespacesGetReplyIsTheResource(t *testing.T) {
	t.Parallel()
	s := single(t)
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+s.addr+"/skald.v1.Namespaces/Get", strings.NewReader(`{"name":"default"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("Get: %d %v", resp.StatusCode, err)
	}
	if got["name"] != "default" || got["createdAt"] == nil || got["namespace"] != nil {
		t.Fatalf("Get reply %v, want the namespace's fields at the top level", got)
	}
}

// TestOversizedMessageIsInvalidOnBothAPIs: one limit, one error. A
// message over 1 MiB is invalid input (400 / InvalidArgument, stating the
// limit) on the EventoDB API and on Connect, never a retryable
// ResourceExhausted.
func TestOversizedMessageIsInvalidOnBothAPIs(t *testing.T) {
	t.Parallel()
	s := single(t)
	big := map[string]any{"x": strings.Repeat("a", 1<<20)}
	status, body := evClient{t, s.addr, adminToken}.call("stream.write", "big-1", map[string]any{"type": "T", "data": big})
	checkEvError(t, "stream.write over 1 MiB", status, body, http.StatusBadRequest, "INVALID_REQUEST")
	if !strings.Contains(string(body), "at most 1048576 (1 MiB) per message") {
		t.Fatalf("EventoDB error %s does not state the limit", body)
	}
	data, _ := json.Marshal(big)
	_, err := newClients(s, protocols[0], adminToken).events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{
		Stream: "big-1", Messages: []*skaldv1.NewMessage{{Type: "T", Data: data}},
	}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "at most 1048576 (1 MiB) per message") {
		t.Fatalf("Connect append over 1 MiB: %v, want invalid_argument stating the limit", err)
	}
}

// TestStorageFullErrors: the leader's disk-space refusal is
// ResourceExhausted on Connect and 503 STORAGE_FULL on the EventoDB API,
// with the node's explanation (which server, what to free).
func TestStorageFullErrors(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("%w: server n1 has 10.0 MiB free for its data, under the 64.0 MiB minimum", nodeapi.ErrStorageFull)
	if ce := ConnectError(err); connect.CodeOf(ce) != connect.CodeResourceExhausted || !strings.Contains(ce.Error(), "server n1 has 10.0 MiB free") {
		t.Fatalf("Connect: %v", ce)
	}
	e := (&eventodb{log: slog.New(slog.DiscardHandler)}).backendError(context.Background(), err)
	if e.Status != http.StatusServiceUnavailable || e.Code != "STORAGE_FULL" ||
		!strings.Contains(e.Message, "server n1 has 10.0 MiB free") {
		t.Fatalf("EventoDB: %+v", e)
	}
}

// TestCORSMembers: with no origins configured, a browser may still call
// from a member's own console (how the console moves to another node),
// and from nowhere else.
func TestCORSMembers(t *testing.T) {
	t.Parallel()
	s := single(t)
	testutil.Eventually(t, waitTimeout, "the node's API address", func() bool { _, ok := s.n.NodeAddr(s.n.ID()); return ok })
	preflight := func(origin string) string {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodOptions, "http://"+s.addr+"/skald.v1.Cluster/Status", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,connect-protocol-version,content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Access-Control-Allow-Origin")
	}
	addr, _ := s.n.NodeAddr(s.n.ID())
	for _, o := range []string{"http://" + addr, "https://" + addr} {
		if got := preflight(o); got != o {
			t.Errorf("preflight from member origin %s: Allow-Origin %q", o, got)
		}
	}
	for _, o := range []string{"http://evil.example", "http://" + addr + ".evil.example", "ftp://" + addr} {
		if got := preflight(o); got != "" {
			t.Errorf("preflight from %s allowed: %q", o, got)
		}
	}
}

// TestConsoleServed: every node serves the console at /ui/, without a
// token; /ui redirects there.
func TestConsoleServed(t *testing.T) {
	t.Parallel()
	s := single(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) *http.Response {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, "http://"+s.addr+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if r := get("/ui"); r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/ui/" {
		t.Fatalf("/ui: %d, Location %q", r.StatusCode, r.Header.Get("Location"))
	}
	for path, want := range map[string]string{"/ui/": "text/html; charset=utf-8", "/ui/app.js": "text/javascript; charset=utf-8", "/ui/app.css": "text/css; charset=utf-8"} {
		if r := get(path); r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != want {
			t.Errorf("%s: %d %q, want 200 %q", path, r.StatusCode, r.Header.Get("Content-Type"), want)
		}
	}
}
