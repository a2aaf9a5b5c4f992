package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skalddb/skald/rpc/evdb"
)

// The EventoDB API suite, written case by case from
// docs/eventodb-api.md, against a single node and against
// a follower of a 3-node cluster.

type evClient struct {
	t     *testing.T
	addr  string
	token string
}

// call posts ["method", args...] and returns the status and body.
func (c evClient) call(method string, args ...any) (int, []byte) {
	c.t.Helper()
	body, err := json.Marshal(append([]any{method}, args...))
	if err != nil {
		c.t.Fatal(err)
	}
	return c.raw(http.MethodPost, "/rpc", body, "Bearer "+c.token)
}

func (c evClient) raw(method, path string, body []byte, auth string) (int, []byte) {
	c.t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(c.t), method, "http://"+c.addr+path, bytes.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// ok calls and decodes a 200 result into out.
func (c evClient) ok(out any, method string, args ...any) {
	c.t.Helper()
	status, body := c.call(method, args...)
	if status != 200 {
		c.t.Fatalf("%s %v: %d %s", method, args, status, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			c.t.Fatalf("%s: decode %s: %v", method, body, err)
		}
	}
}

// fails calls and checks the status and error code.
func (c evClient) fails(status int, code, method string, args ...any) {
	c.t.Helper()
	got, body := c.call(method, args...)
	checkEvError(c.t, fmt.Sprintf("%s %v", method, args), got, body, status, code)
}

func checkEvError(t *testing.T, what string, got int, body []byte, status int, code string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if got != status || json.Unmarshal(body, &e) != nil || e.Error.Code != code {
		t.Fatalf("%s: %d %s, want %d %s", what, got, body, status, code)
	}
}

func TestEventoDB(t *testing.T) {
	for _, target := range []struct {
		name  string
		start func(testing.TB) *server
	}{{"single", single}, {"follower", followerOfThree}} {
		t.Run(target.name, func(t *testing.T) { evdbSuite(t, target.start(t)) })
	}
}

func evdbSuite(t *testing.T, s *server) {
	admin := evClient{t, s.addr, adminToken}
	var created struct{ Namespace, Token, CreatedAt string }
	admin.ok(&created, "ns.create", "test-write-001", map[string]any{"description": "sdk test"})
	if created.Namespace != "test-write-001" || !strings.HasPrefix(created.Token, "ns_dGVzdC13cml0ZS0wMDE_") || created.CreatedAt == "" {
		t.Fatalf("ns.create: %+v", created)
	}
	c := evClient{t, s.addr, created.Token}

	t.Run("write and read", func(t *testing.T) {
		c.t = t
		var w struct{ Position, GlobalPosition int64 }
		c.ok(&w, "stream.write", "account-123", map[string]any{"type": "Opened", "data": map[string]any{"owner": "ann"}}, map[string]any{})
		if w.Position != 0 || w.GlobalPosition != 1 {
			t.Fatalf("first write %+v", w)
		}
		c.ok(&w, "stream.write", "account-123", map[string]any{"type": "Deposited", "data": map[string]any{"amount": 10}, "metadata": nil},
			map[string]any{"id": "0192f0c4-0000-7000-8000-00000000abcd", "expectedVersion": 0})
		if w.Position != 1 || w.GlobalPosition != 2 {
			t.Fatalf("second write %+v", w)
		}
		c.fails(409, "STREAM_VERSION_CONFLICT", "stream.write", "account-123", map[string]any{"type": "X", "data": map[string]any{}}, map[string]any{"expectedVersion": 0})
		c.fails(409, "STREAM_VERSION_CONFLICT", "stream.write", "account-123", map[string]any{"type": "X", "data": map[string]any{}}, map[string]any{"expectedVersion": -1})
		c.ok(nil, "stream.write", "account-9+retry", map[string]any{"type": "Opened", "data": map[string]any{}, "metadata": map[string]any{"correlationStreamName": "workflow-1"}})
		c.ok(nil, "stream.write", "account-9", map[string]any{"type": "Opened", "data": map[string]any{}})
		c.ok(nil, "stream.write", "account", map[string]any{"type": "Opened", "data": map[string]any{}})

		var msgs [][]json.RawMessage
		c.ok(&msgs, "stream.get", "account-123", map[string]any{})
		if len(msgs) != 2 || len(msgs[0]) != 7 || string(msgs[1][0]) != `"0192f0c4-0000-7000-8000-00000000abcd"` ||
			string(msgs[1][1]) != `"Deposited"` || string(msgs[1][2]) != "1" || string(msgs[1][3]) != "2" ||
			string(msgs[1][4]) != `{"amount":10}` || string(msgs[1][5]) != "null" {
			t.Fatalf("stream.get: %s", msgs)
		}
		var ts string
		json.Unmarshal(msgs[0][6], &ts)
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.HasSuffix(ts, "Z") {
			t.Fatalf("time %q", ts)
		}
		for _, tc := range []struct {
			opts map[string]any
			n    int
		}{{map[string]any{"position": 1}, 1}, {map[string]any{"position": -5}, 2}, {map[string]any{"batchSize": 1}, 1},
			{map[string]any{"batchSize": -1}, 2}, {map[string]any{"batchSize": 0}, 2}, {map[string]any{"globalPosition": 2}, 1}, {map[string]any{"position": 1.9}, 1}} {
			c.ok(&msgs, "stream.get", "account-123", tc.opts)
			if len(msgs) != tc.n {
				t.Fatalf("stream.get %v: %d messages, want %d", tc.opts, len(msgs), tc.n)
			}
		}
		c.ok(&msgs, "stream.get", "nobody-1")
		if len(msgs) != 0 {
			t.Fatal("unknown stream not []")
		}
		var last []json.RawMessage
		c.ok(&last, "stream.last", "account-123", map[string]any{"type": "Opened"})
		if len(last) != 7 || string(last[2]) != "0" {
			t.Fatalf("stream.last by type: %s", last)
		}
		for _, args := range [][]any{{"stream.last", "nobody-1"}, {"stream.version", "nobody-1"}, {"stream.last", "account-123", map[string]any{"type": "Nope"}}} {
			status, body := c.call(args[0].(string), args[1:]...)
			if status != 200 || strings.TrimSpace(string(body)) != "null" {
				t.Fatalf("%v: %d %s, want null", args, status, body)
			}
		}
		var ver int64
		c.ok(&ver, "stream.version", "account-123")
		if ver != 1 {
			t.Fatalf("stream.version %d", ver)
		}

		var cat [][]json.RawMessage
		c.ok(&cat, "category.get", "account", map[string]any{})
		if len(cat) != 5 || len(cat[0]) != 8 || string(cat[0][1]) != `"account-123"` {
			t.Fatalf("category.get: %s", cat)
		}
		c.ok(&cat, "category.get", "account", map[string]any{"position": 3})
		if len(cat) != 3 || string(cat[0][4]) != "3" {
			t.Fatalf("category.get from 3: %s", cat)
		}
		c.ok(&cat, "category.get", "account", map[string]any{"globalPosition": 4})
		if len(cat) != 2 {
			t.Fatalf("category.get globalPosition alias: %d", len(cat))
		}
		c.ok(&cat, "category.get", "account", map[string]any{"correlation": "workflow"})
		if len(cat) != 1 || string(cat[0][1]) != `"account-9+retry"` {
			t.Fatalf("correlation: %s", cat)
		}
		c.ok(&cat, "category.get", "account-123")
		if len(cat) != 0 {
			t.Fatal("category name with '-' matched")
		}
		c.ok(&cat, "category.get", "", map[string]any{"batchSize": -1})
		if len(cat) != 5 {
			t.Fatalf("category.get \"\": %d", len(cat))
		}
		// Consumer groups: members split the streams with an id; account-9
		// and account-9+retry share a member; "account" goes to none.
		owner := map[string]int{}
		for m := 0; m < 2; m++ {
			c.ok(&cat, "category.get", "account", map[string]any{"consumerGroup": map[string]any{"member": m, "size": 2}})
			for _, msg := range cat {
				var stream string
				json.Unmarshal(msg[1], &stream)
				owner[stream] = m
			}
		}
		if len(owner) != 3 || owner["account-9"] != owner["account-9+retry"] {
			t.Fatalf("consumer group owners %v", owner)
		}
		for _, g := range []any{map[string]any{"member": 2, "size": 2}, map[string]any{"member": 0, "size": 0}, map[string]any{"member": 0}, "x", nil} {
			c.fails(400, "INVALID_REQUEST", "category.get", "account", map[string]any{"consumerGroup": g})
		}
	})

	t.Run("namespaces", func(t *testing.T) {
		c.t, admin.t = t, t
		admin.fails(409, "NAMESPACE_EXISTS", "ns.create", "test-write-001")
		admin.fails(400, "INVALID_REQUEST", "ns.create", "other", map[string]any{"token": created.Token})
		c.fails(403, "AUTH_UNAUTHORIZED", "ns.create", "mine")
		c.fails(403, "AUTH_UNAUTHORIZED", "ns.list")
		c.fails(403, "AUTH_UNAUTHORIZED", "ns.info", "default")
		admin.fails(404, "NAMESPACE_NOT_FOUND", "ns.info", "nope")
		admin.fails(404, "NAMESPACE_NOT_FOUND", "ns.delete", "nope")
		admin.fails(400, "INVALID_REQUEST", "ns.delete", "default")
		var info map[string]any
		c.ok(&info, "ns.info", "test-write-001")
		if info["messageCount"] != float64(5) || info["streamCount"] != float64(4) || info["description"] != "sdk test" || info["lastActivity"] == nil {
			t.Fatalf("ns.info %v", info)
		}
		var list []map[string]any
		admin.ok(&list, "ns.list", map[string]any{})
		counts := map[string]any{}
		for _, n := range list {
			counts[n["namespace"].(string)] = n["messageCount"]
		}
		if counts["test-write-001"] != float64(5) || counts["default"] == nil {
			t.Fatalf("ns.list %v", list)
		}
		var streams []map[string]any
		c.ok(&streams, "ns.streams", map[string]any{"prefix": "account", "limit": 2})
		if len(streams) != 2 || streams[0]["stream"] != "account" || streams[1]["stream"] != "account-123" || streams[1]["version"] != float64(1) {
			t.Fatalf("ns.streams %v", streams)
		}
		if la, _ := streams[1]["lastActivity"].(string); !strings.HasSuffix(la, "Z") || strings.Contains(la, ".") {
			t.Fatalf("lastActivity %q should be whole seconds", la)
		}
		c.ok(&streams, "ns.streams", map[string]any{"cursor": "account-9"})
		if len(streams) != 1 || streams[0]["stream"] != "account-9+retry" {
			t.Fatalf("ns.streams after cursor %v", streams)
		}
		c.fails(400, "INVALID_REQUEST", "ns.streams", map[string]any{"limit": 1001})
		var cats []map[string]any
		c.ok(&cats, "ns.categories")
		if len(cats) != 1 || cats[0]["category"] != "account" || cats[0]["streamCount"] != float64(4) || cats[0]["messageCount"] != float64(5) {
			t.Fatalf("ns.categories %v", cats)
		}
		var v string
		c.ok(&v, "sys.version")
		if v == "" {
			t.Fatal("sys.version empty")
		}
		// Delete, then the token is refused.
		var tmp struct{ Token string }
		admin.ok(&tmp, "ns.create", "tmp-ns")
		var del map[string]any
		admin.ok(&del, "ns.delete", "tmp-ns")
		if del["namespace"] != "tmp-ns" || del["messagesDeleted"] != float64(0) || del["deletedAt"] == nil {
			t.Fatalf("ns.delete %v", del)
		}
		evClient{t, s.addr, tmp.Token}.fails(403, "AUTH_UNAUTHORIZED", "stream.version", "x")
	})

	t.Run("auth and envelope", func(t *testing.T) {
		c.t = t
		body := []byte(`["sys.health"]`)
		check := func(what, method, path, auth string, status int, code string) {
			got, b := c.raw(method, path, body, auth)
			checkEvError(t, what, got, b, status, code)
		}
		check("no token", "POST", "/rpc", "", 401, "AUTH_REQUIRED")
		check("basic auth", "POST", "/rpc", "Basic abc", 401, "AUTH_REQUIRED")
		check("malformed", "POST", "/rpc", "Bearer ns_x", 401, "AUTH_INVALID_TOKEN")
		check("unknown namespace", "POST", "/rpc", "Bearer ns_bm9wZQ_"+strings.Repeat("0", 64), 403, "AUTH_UNAUTHORIZED")
		check("wrong method", "GET", "/rpc", "Bearer "+c.token, 405, "INVALID_REQUEST")
		check("unknown path", "GET", "/nothing", "", 404, "NOT_FOUND")
		if got, b := c.raw("POST", "/rpc?token="+c.token, body, ""); got != 200 || !strings.Contains(string(b), `"status":"ok"`) {
			t.Fatalf("token query parameter: %d %s", got, b)
		}
		for _, bad := range []string{`xx`, `{}`, `[]`, `[1]`, `["stream.get"] ["x"]`} {
			got, b := c.raw("POST", "/rpc", []byte(bad), "Bearer "+c.token)
			checkEvError(t, "envelope "+bad, got, b, 400, "INVALID_REQUEST")
		}
		c.fails(404, "METHOD_NOT_FOUND", "stream.nope")
		for _, args := range [][]any{
			{"stream.write"}, {"stream.write", ""}, {"stream.write", 5, map[string]any{"type": "T", "data": map[string]any{}}},
			{"stream.write", "s-1", "notobject"}, {"stream.write", "s-1", map[string]any{"data": map[string]any{}}},
			{"stream.write", "s-1", map[string]any{"type": "T"}}, {"stream.write", "s-1", map[string]any{"type": "T", "data": nil}},
			{"stream.write", "s-1", map[string]any{"type": "T", "data": []int{1}}},
			{"stream.write", "s-1", map[string]any{"type": "T", "data": map[string]any{}, "metadata": "x"}},
			{"stream.write", "s-1", map[string]any{"type": "T", "data": map[string]any{}}, nil},
			{"stream.write", "s-1", map[string]any{"type": "T", "data": map[string]any{}}, map[string]any{"expectedVersion": nil}},
			{"stream.write", "s-1", map[string]any{"type": "T", "data": map[string]any{}}, map[string]any{"id": 7}},
			{"stream.get", "s-1", map[string]any{"batchSize": 10001}}, {"stream.get", "s-1", nil}, {"stream.get", "s-1", map[string]any{"position": "a"}},
			{"category.get", 5}, {"ns.info"},
		} {
			c.fails(400, "INVALID_REQUEST", args[0].(string), args[1:]...)
		}
		var v int64
		c.ok(&v, "stream.version", "account-123")
		if v != 1 {
			t.Fatal("rejected writes changed a stream")
		}
	})

	t.Run("encoding", func(t *testing.T) {
		c.t = t
		stream := "kontō-ü+ñ"
		data := map[string]any{"text": "héllo wörld — 日本語 😀", "big": 12345678901234567, "frac": 0.1, "nested": []any{true, nil, map[string]any{"k": "v"}}}
		c.ok(nil, "stream.write", stream, map[string]any{"type": "Ünïcode", "data": data})
		large := map[string]any{"blob": strings.Repeat("x", 512<<10)}
		c.ok(nil, "stream.write", stream, map[string]any{"type": "Large", "data": large})
		var msgs [][]json.RawMessage
		c.ok(&msgs, "stream.get", stream)
		var got0, got1 map[string]any
		json.Unmarshal(msgs[0][4], &got0)
		json.Unmarshal(msgs[1][4], &got1)
		want0, _ := json.Marshal(data)
		var want0m map[string]any
		json.Unmarshal(want0, &want0m)
		if !reflect.DeepEqual(got0, want0m) || got1["blob"] != large["blob"] {
			t.Fatalf("round trip: %v", got0)
		}
		if !strings.Contains(string(msgs[0][4]), "12345678901234567") {
			t.Fatalf("number text changed: %s", msgs[0][4])
		}
	})

	t.Run("subscribe", func(t *testing.T) { c.t = t; sseSuite(t, c) })
	t.Run("import and export", func(t *testing.T) { c.t, admin.t = t, t; importSuite(t, s, c, admin) })
}

// poke is one SSE poke.
type poke struct {
	Stream         string
	Position       int64
	GlobalPosition int64
}

// sse opens /subscribe?query and returns a channel of pokes (and ": ready"
// comments as a poke with Stream ":ready").
func sse(t *testing.T, c evClient, query string) (<-chan poke, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.addr+"/subscribe?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	out := make(chan poke, 1000)
	if resp.StatusCode != 200 {
		close(out)
		return out, resp
	}
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == ": ready":
				out <- poke{Stream: ":ready"}
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "poke":
				var p poke
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &p)
				out <- p
			}
		}
	}()
	return out, resp
}

func next(t *testing.T, ch <-chan poke) poke {
	t.Helper()
	select {
	case p, ok := <-ch:
		if !ok {
			t.Fatal("event stream ended")
		}
		return p
	case <-time.After(waitTimeout):
		t.Fatal("no poke")
	}
	return poke{}
}

func sseSuite(t *testing.T, c evClient) {
	for i := 0; i < 3; i++ {
		c.ok(nil, "stream.write", "sse-1", map[string]any{"type": "T", "data": map[string]any{}})
	}
	ch, resp := sse(t, c, "stream=sse-1&position=1")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	for _, want := range []int64{1, 2} { // replay from position 1
		if p := next(t, ch); p.Stream != "sse-1" || p.Position != want {
			t.Fatalf("replay poke %+v, want position %d", p, want)
		}
	}
	all, _ := sse(t, c, "all=true")
	if p := next(t, all); p.Stream != ":ready" {
		t.Fatalf("all=true starts with %+v, want the ready comment", p)
	}
	group, _ := sse(t, c, "category=sse&consumer=0&size=1")
	for i := 0; i < 3; i++ { // replay of the category for the only member
		next(t, group)
	}
	var w struct{ Position, GlobalPosition int64 }
	c.ok(&w, "stream.write", "sse-1", map[string]any{"type": "T", "data": map[string]any{}})
	for name, ch := range map[string]<-chan poke{"stream": ch, "all": all, "group": group} {
		if p := next(t, ch); p.Stream != "sse-1" || p.Position != 3 || p.GlobalPosition != w.GlobalPosition {
			t.Fatalf("%s live poke %+v, want position 3 global %d", name, p, w.GlobalPosition)
		}
	}
	for _, q := range []string{"", "stream=a&category=b", "all=true&stream=a", "stream=a&position=x", "category=a&consumer=1&size=1", "category=a&size=0&consumer=0"} {
		_, resp := sse(t, c, q)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || strings.HasPrefix(string(b), "{") {
			t.Fatalf("subscribe?%s: %d %q, want 400 plain text", q, resp.StatusCode, b)
		}
	}
}

func importSuite(t *testing.T, s *server, c, admin evClient) {
	// Export the namespace as the EventoDB CLI does: category.get "" in pages.
	var export bytes.Buffer
	total := 0
	for pos := int64(0); ; {
		var page [][]json.RawMessage
		c.ok(&page, "category.get", "", map[string]any{"position": pos, "batchSize": 3})
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			var rec struct {
				ID     string          `json:"id"`
				Stream string          `json:"stream"`
				Type   string          `json:"type"`
				Pos    int64           `json:"pos"`
				GPos   int64           `json:"gpos"`
				Data   json.RawMessage `json:"data"`
				Meta   json.RawMessage `json:"meta"`
				Time   string          `json:"time"`
			}
			json.Unmarshal(m[0], &rec.ID)
			json.Unmarshal(m[1], &rec.Stream)
			json.Unmarshal(m[2], &rec.Type)
			json.Unmarshal(m[3], &rec.Pos)
			json.Unmarshal(m[4], &rec.GPos)
			rec.Data, rec.Meta = m[5], m[6]
			json.Unmarshal(m[7], &rec.Time)
			line, _ := json.Marshal(rec)
			export.Write(append(line, '\n'))
			pos = rec.GPos + 1
			total++
		}
	}
	var dst struct{ Token string }
	admin.ok(&dst, "ns.create", "imported")
	d := evClient{t, s.addr, dst.Token}
	events := func(body []byte, query string) []map[string]any {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+s.addr+"/import"+query, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+d.token)
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out []map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev map[string]any
				json.Unmarshal([]byte(line), &ev)
				out = append(out, ev)
			}
		}
		return out
	}
	evs := events(export.Bytes(), "")
	if last := evs[len(evs)-1]; last["done"] != true || last["imported"] != float64(total) {
		t.Fatalf("import events %v", evs)
	}
	var a, b [][]json.RawMessage
	c.ok(&a, "category.get", "", map[string]any{"batchSize": -1})
	d.ok(&b, "category.get", "", map[string]any{"batchSize": -1})
	if len(a) != total || !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip differs:\n%s\n%s", a, b)
	}
	// Importing again clashes and imports nothing of that chunk.
	evs = events(export.Bytes(), "")
	if last := evs[len(evs)-1]; last["error"] != "POSITION_EXISTS" || last["line"] != float64(1) {
		t.Fatalf("re-import %v", evs)
	}
	// force=true replaces the namespace's content.
	evs = events([]byte(strings.SplitN(export.String(), "\n", 2)[0]+"\n"), "?force=true")
	if last := evs[len(evs)-1]; last["done"] != true || last["imported"] != float64(1) {
		t.Fatalf("forced import %v", evs)
	}
	d.ok(&b, "category.get", "", map[string]any{"batchSize": -1})
	if len(b) != 1 {
		t.Fatalf("after force: %d messages", len(b))
	}
	for line, bad := range map[string]string{`{"x":`: "INVALID_JSON", `{"id":"a","stream":"s-1","type":"T","pos":0,"gpos":99,"data":{},"time":"yesterday"}`: "INVALID_RECORD"} {
		evs = events([]byte("\n"+line+"\n"), "")
		if last := evs[len(evs)-1]; last["error"] != bad || last["line"] != float64(2) {
			t.Fatalf("import %q: %v, want %s at line 2", line, evs, bad)
		}
	}
	evs = events([]byte(strings.Repeat("x", evdb.MaxImportLine+10)+"\n"), "")
	if last := evs[len(evs)-1]; last["error"] != "READ_ERROR" {
		t.Fatalf("long line: %v", evs)
	}
}
