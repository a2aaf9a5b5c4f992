package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skalddb/skald/fsm"
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

// TestAuditChangesAndRefusals: index, group and retention changes are
// audited with what they changed, and so is a call that a known
// credential was refused (its role or its scope); a call with no valid
// token is not (only counted elsewhere).
func TestAuditChangesAndRefusals(t *testing.T) {
	var logs lockedBuffer
	opts := defaultOptions
	opts.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	s := singleWith(t, opts)
	status, out := connectCall(t, s.addr, adminToken, "skald.v1.Namespaces/Create", `{"name":"app"}`, nil)
	var created struct{ Token string }
	if status != 200 || json.Unmarshal(out, &created) != nil {
		t.Fatalf("create app: %d %s", status, out)
	}
	owner := created.Token
	reader := createCredential(t, s, owner, "viewer", fsm.RoleReader, false)
	scoped := createCredential(t, s, owner, "billing", fsm.RoleWriter, true)
	for _, c := range []struct{ procedure, body string }{
		{"skald.v1.Indexes/Create", `{"definition":{"name":"amount","version":1,"category":"acct",` +
			`"fields":[{"source":"INDEX_FIELD_SOURCE_DATA","pointer":"/amount","type":"INDEX_FIELD_TYPE_INT"}]}}`},
		{"skald.v1.Indexes/Pause", `{"name":"amount"}`},
		{"skald.v1.Subscriptions/CreateGroup", `{"name":"mailer","category":"acct"}`},
		{"skald.v1.Namespaces/SetRetentionPolicy", `{"policy":{"scope":"RETENTION_SCOPE_CATEGORY","name":"acct","maxCount":"10"}}`},
		{"skald.v1.Subscriptions/DeleteGroup", `{"name":"mailer"}`},
		{"skald.v1.Indexes/Delete", `{"name":"amount"}`},
	} {
		if status, out := connectCall(t, s.addr, owner, c.procedure, c.body, nil); status != 200 {
			t.Fatalf("%s: %d %s", c.procedure, status, out)
		}
	}
	if status, _ := connectCall(t, s.addr, reader, "skald.v1.EventStore/Append",
		`{"stream":"acct-1","messages":[{"type":"T","data":"e30="}]}`, nil); status != 403 {
		t.Fatalf("reader append: %d, want 403", status)
	}
	if status, _ := connectCall(t, s.addr, scoped, "skald.v1.EventStore/Append",
		`{"stream":"acct-1","messages":[{"type":"T","data":"e30="}]}`, nil); status != 403 {
		t.Fatalf("scoped append outside its scope: %d, want 403", status)
	}
	if status, _ := connectCall(t, s.addr, "ns_YXBw_"+strings.Repeat("0", 64), "skald.v1.EventStore/ReadAll", `{}`, nil); status != 401 {
		t.Fatalf("a wrong token: %d, want 401", status)
	}

	type want struct{ action, credential, target string }
	wants := []want{
		{"index.create", "initial", "amount"},
		{"index.pause", "initial", "amount"},
		{"group.create", "initial", "mailer"},
		{"retention.set", "initial", "category:acct"},
		{"group.delete", "initial", "mailer"},
		{"index.delete", "initial", "amount"},
		{"access.refused", "viewer", "skald.v1.EventStore/Append"},
		{"access.refused", "billing", "skald.v1.EventStore/Append"},
	}
	var got []want
	for _, l := range logs.auditLines(t) {
		if a := l["action"].(string); a != "namespace.create" && a != "credential.create" {
			got = append(got, want{a, l["credential"].(string), l["target"].(string)})
			if a == "access.refused" && (l["namespace"] != "app" || !strings.Contains(l["reason"].(string), "may not")) {
				t.Errorf("refusal line: %v", l)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(wants) {
		t.Fatalf("audit lines:\n%v\nwant\n%v", got, wants)
	}
	if n := auditCount(t, s.reg, "access.refused"); n != 2 {
		t.Errorf("skald_audit_events_total{action=access.refused} = %v, want 2", n)
	}
}
