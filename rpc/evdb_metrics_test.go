package rpc

import (
	"bytes"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// rpcCount is skald_rpc_requests_total{procedure, code} in reg (0 when
// the series does not exist).
func rpcCount(t *testing.T, reg prometheus.Gatherer, procedure, code string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "skald_rpc_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["procedure"] == procedure && labels["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestEventoDBCallsAreCounted: EventoDB /rpc and /import calls count in
// skald_rpc_requests_total (and the latency histogram) beside Connect's,
// with the method as the procedure and EventoDB's error code, in lower
// case, as the code. 30 stream.write calls used to leave the counter
// unchanged (issue 31, item 5).
func TestEventoDBCallsAreCounted(t *testing.T) {
	s := single(t)
	c := evClient{t: t, addr: s.addr, token: adminToken}
	for range 30 {
		c.ok(nil, "stream.write", "account-1", map[string]any{"type": "Opened", "data": map[string]any{}})
	}
	c.fails(409, "STREAM_VERSION_CONFLICT", "stream.write", "account-1", map[string]any{"type": "T", "data": map[string]any{}}, map[string]any{"expectedVersion": 3})
	c.ok(nil, "stream.get", "account-1")
	c.ok(nil, "sys.version")
	c.fails(404, "METHOD_NOT_FOUND", "no.such.method")
	c.fails(404, "METHOD_NOT_FOUND", "another.made.up.one")
	if status, body := c.raw(http.MethodPost, "/rpc", []byte(`["stream.get","account-1"]`), ""); status != 401 {
		t.Fatalf("no token: %d %s", status, body)
	}
	if status, body := c.raw(http.MethodPost, "/rpc", []byte(`{"not":"an array"}`), "Bearer "+adminToken); status != 400 {
		t.Fatalf("bad envelope: %d %s", status, body)
	}
	record := `{"id":"i-1","stream":"order-1","type":"Placed","pos":0,"gpos":1000,"data":{},"meta":null,"time":"2025-01-15T10:00:00Z"}` + "\n"
	if status, body := c.raw(http.MethodPost, "/import", []byte(record), "Bearer "+adminToken); status != 200 || !bytes.Contains(body, []byte(`"done":true`)) {
		t.Fatalf("import: %d %s", status, body)
	}
	if status, body := c.raw(http.MethodPost, "/import", []byte(record), "Bearer "+adminToken); status != 200 || !bytes.Contains(body, []byte("POSITION_EXISTS")) {
		t.Fatalf("second import: %d %s", status, body)
	}
	cl := newClients(s, protocols[0], adminToken)
	if _, err := cl.events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "account-1"})); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		procedure, code string
		want            float64
	}{
		{"eventodb/stream.write", "ok", 30},
		{"eventodb/stream.write", "stream_version_conflict", 1},
		{"eventodb/stream.get", "ok", 1},
		{"eventodb/sys.version", "ok", 1},
		// Unknown methods never become labels.
		{"eventodb/rpc", "method_not_found", 2},
		{"eventodb/no.such.method", "method_not_found", 0},
		{"eventodb/rpc", "auth_required", 1},
		{"eventodb/rpc", "invalid_request", 1},
		{"eventodb/import", "ok", 1},
		{"eventodb/import", "position_exists", 1},
		// Connect calls count as before.
		{"/skald.v1.EventStore/StreamVersion", "ok", 1},
	}
	for _, tc := range cases {
		if got := rpcCount(t, s.reg, tc.procedure, tc.code); got != tc.want {
			t.Errorf("skald_rpc_requests_total{procedure=%q,code=%q} = %v, want %v", tc.procedure, tc.code, got, tc.want)
		}
	}
	// The latency histogram counts the same calls.
	families, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "skald_rpc_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "procedure" && l.GetValue() == "eventodb/stream.write" && m.GetHistogram().GetSampleCount() == 30 {
					return
				}
			}
		}
	}
	t.Fatal("no skald_rpc_duration_seconds series with 30 eventodb/stream.write calls")
}
