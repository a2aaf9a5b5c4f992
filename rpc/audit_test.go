package rpc

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// lockedBuffer is a log destination several goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// auditLines returns the audit lines logged so far, decoded.
func (l *lockedBuffer) auditLines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.b.String(), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "audit" {
			continue
		}
		out = append(out, m)
	}
	return out
}

func auditCount(t *testing.T, reg prometheus.Gatherer, action string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "skald_audit_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && l.GetValue() == action {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no skald_audit_events_total{action=%q}", action)
	return 0
}

// Every credential and namespace change, and every call of an admin
// credential on another namespace, is one audit line (who, what, from
// where) and one count; a call on one's own namespace is neither.
func TestAuditTrail(t *testing.T) {
	var logs lockedBuffer
	opts := defaultOptions
	opts.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	s := singleWith(t, opts)
	status, out := connectCall(t, s.addr, adminToken, "skald.v1.Namespaces/Create", `{"name":"app"}`, nil)
	var created struct{ Token string }
	if status != 200 || json.Unmarshal(out, &created) != nil {
		t.Fatalf("create app: %d %s", status, out)
	}
	createCredential(t, s, created.Token, "svc", 2, false)
	if status, out := connectCall(t, s.addr, adminToken, "skald.v1.EventStore/ReadAll", `{}`, map[string][]string{NamespaceHeader: {"app"}}); status != 200 {
		t.Fatalf("admin read of app: %d %s", status, out)
	}
	if status, _ := evCallCode(t, s.addr, created.Token, "token.revoke", `"svc"`); status != 200 {
		t.Fatalf("token.revoke: %d", status)
	}
	connectCall(t, s.addr, created.Token, "skald.v1.EventStore/ReadAll", `{}`, nil) // its own: not audited

	type want struct{ action, credential, credNS, namespace, target string }
	wants := []want{
		{"namespace.create", "initial", "default", "app", "app"},
		{"credential.create", "initial", "app", "app", "svc"},
		{"admin.other-namespace", "initial", "default", "app", "skald.v1.EventStore/ReadAll"},
		{"credential.revoke", "initial", "app", "app", "svc"},
	}
	lines := logs.auditLines(t)
	if len(lines) != len(wants) {
		t.Fatalf("%d audit lines, want %d: %v", len(lines), len(wants), lines)
	}
	for i, w := range wants {
		l := lines[i]
		got := want{l["action"].(string), l["credential"].(string), l["credential-namespace"].(string), l["namespace"].(string), l["target"].(string)}
		if got != w || !strings.HasPrefix(l["remote"].(string), "127.0.0.1:") || l["time"] == nil {
			t.Errorf("audit line %d: %v, want %+v from 127.0.0.1", i, l, w)
		}
		if n := auditCount(t, s.reg, w.action); n != 1 {
			t.Errorf("skald_audit_events_total{action=%q} = %v, want 1", w.action, n)
		}
	}
	if lines[1]["role"] != "writer" {
		t.Errorf("credential.create line: role %v, want writer", lines[1]["role"])
	}
}
