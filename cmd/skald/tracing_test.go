package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/skalddb/skald/internal/testutil"
)

// collector is an OTLP/HTTP trace receiver on loopback: it keeps the
// span names of every export, by trace id, and each export's resource.
type collector struct {
	mu        sync.Mutex
	paths     []string
	spans     map[string][]string // hex trace id -> span names
	resources []map[string]string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths = append(c.paths, r.URL.Path)
	for _, rs := range req.ResourceSpans {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.Key] = kv.GetValue().GetStringValue()
		}
		c.resources = append(c.resources, res)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				id := fmt.Sprintf("%x", s.TraceId)
				c.spans[id] = append(c.spans[id], s.Name)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(nil)
}

func (c *collector) trace(id string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.spans[id]...)
}

// TestServerOTLPEndpoint: `skald server --otlp-endpoint URL` sends the
// spans of an EventoDB write that carried a traceparent to the collector
// at URL/v1/traces, in the caller's trace, with the node's resource.
func TestServerOTLPEndpoint(t *testing.T) {
	col := &collector{spans: map[string][]string{}}
	srv := httptest.NewServer(col)
	defer srv.Close()
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // export every 100 ms, not 5 s
	p := startServer(t, "", "--admin-token", testAdmin, "--node-name", "traced-node", "--otlp-endpoint", srv.URL)
	out, errOut, code := runCLI(t, []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}, "ns", "create", "acme")
	token := regexp.MustCompile(`ns_\S+`).FindString(out)
	if code != 0 || token == "" {
		t.Fatalf("ns create: %d %s %s", code, out, errOut)
	}

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, err := http.NewRequest(http.MethodPost, "http://"+p.addr+"/rpc", strings.NewReader(`["stream.write", "order-1", {"type": "Placed", "data": {}}]`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream.write: %d %s", resp.StatusCode, b)
	}

	want := []string{"eventodb/stream.write", "raft.propose", "raft.commit", "fsm.apply", "reply"}
	testutil.Until(t, 30*time.Second, "the write's spans at the collector", func() (bool, string) {
		got := col.trace(traceID)
		for _, name := range want {
			if !strings.Contains(strings.Join(got, " ")+" ", name+" ") {
				return false, fmt.Sprintf("spans of the trace: %v, want %v", got, want)
			}
		}
		return true, ""
	})
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.paths[0] != "/v1/traces" {
		t.Errorf("exported to %q, want /v1/traces", col.paths[0])
	}
	if r := col.resources[0]; r["service.name"] != "skald" || r["service.instance.id"] != "traced-node" {
		t.Errorf("resource %v, want service.name skald and service.instance.id traced-node", r)
	}
}

// Bad tracing flags are usage errors (exit 2) naming the flag; the
// endpoint is a setting like any other (SKALD_OTLP_ENDPOINT, the config
// file, --print-config).
func TestServerOTLPFlags(t *testing.T) {
	t.Parallel()
	for _, bad := range []struct {
		name string
		args []string
		want string
	}{
		{"not a URL of http", []string{"--otlp-endpoint", "ftp://collector:4318"}, `--otlp-endpoint "ftp://collector:4318": want an http:// or https:// URL`},
		{"no host", []string{"--otlp-endpoint", "http://"}, "--otlp-endpoint"},
		{"host and port only", []string{"--otlp-endpoint", "collector:4318"}, "--otlp-endpoint"},
		{"ratio above 1", []string{"--otlp-endpoint", "http://127.0.0.1:4318", "--otlp-sample-ratio", "1.5"}, "--otlp-sample-ratio must be between 0 and 1, got 1.5"},
		{"negative ratio", []string{"--otlp-sample-ratio", "-0.1"}, "--otlp-sample-ratio must be between 0 and 1"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			args := append([]string{"server", "--data-dir", t.TempDir()}, bad.args...)
			_, errOut, code := runCLI(t, nil, args...)
			if code != 2 || !strings.Contains(errOut, bad.want) {
				t.Fatalf("exit %d, want 2 naming %q: %s", code, bad.want, errOut)
			}
		})
	}
	out, errOut, code := runCLI(t, []string{"SKALD_OTLP_ENDPOINT=http://otel:4318"}, "server", "--print-config")
	if code != 0 {
		t.Fatalf("--print-config: exit %d: %s", code, errOut)
	}
	for _, line := range []string{`otlp-endpoint: "http://otel:4318"  # env`, `otlp-sample-ratio: "1"  # default`} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("want the line %q in:\n%s", line, out)
		}
	}
}
