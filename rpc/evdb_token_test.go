package rpc

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// token.create, token.list and token.revoke on the EventoDB API, and an
// admin token acting on another namespace through Skald-Namespace.
func TestEventoDBTokens(t *testing.T) {
	s := single(t)
	admin := evClient{t: t, addr: s.addr, token: adminToken}
	var ns struct{ Token string }
	admin.ok(&ns, "ns.create", "shop")
	owner := evClient{t: t, addr: s.addr, token: ns.Token}

	var made struct {
		Name, Role, Token string
		Scope             []string
		ExpiresAt         string
	}
	owner.ok(&made, "token.create", "billing", map[string]any{"role": "writer", "scope": []string{"invoice"}, "expiresAt": "2099-01-02T03:04:05Z"})
	if made.Name != "billing" || made.Role != "writer" || strings.Join(made.Scope, ",") != "invoice" || made.ExpiresAt != "2099-01-02T03:04:05Z" ||
		!strings.HasPrefix(made.Token, "ns_c2hvcA_") {
		t.Fatalf("token.create: %+v", made)
	}
	billing := evClient{t: t, addr: s.addr, token: made.Token}
	billing.ok(nil, "stream.write", "invoice-1", map[string]any{"type": "Issued", "data": map[string]any{}})
	billing.fails(http.StatusForbidden, "AUTH_UNAUTHORIZED", "stream.write", "order-1", map[string]any{"type": "Placed", "data": map[string]any{}})
	owner.fails(http.StatusBadRequest, "INVALID_REQUEST", "token.create", "x", map[string]any{"role": "boss"})
	owner.fails(http.StatusBadRequest, "INVALID_REQUEST", "token.create", "x", map[string]any{"role": "reader", "expiresAt": "2001-01-01T00:00:00Z"})
	owner.fails(http.StatusConflict, "CREDENTIAL_EXISTS", "token.create", "billing", map[string]any{"role": "reader"})
	owner.fails(http.StatusForbidden, "AUTH_UNAUTHORIZED", "token.create", "x", map[string]any{"role": "admin"})
	admin.ok(nil, "token.create", "reports", map[string]any{"role": "reader", "namespace": "shop"})

	var list []struct{ Name, Role string }
	owner.ok(&list, "token.list")
	var names []string
	for _, c := range list {
		names = append(names, c.Name+":"+c.Role)
	}
	if got := strings.Join(names, " "); got != "billing:writer initial:owner reports:reader" {
		t.Fatalf("token.list: %s", got)
	}
	owner.ok(nil, "token.revoke", "billing")
	billing.fails(http.StatusForbidden, "AUTH_UNAUTHORIZED", "stream.get", "invoice-1")
	owner.fails(http.StatusNotFound, "CREDENTIAL_NOT_FOUND", "token.revoke", "billing")

	// The admin reads shop's stream by naming it; shop's token may not
	// name default; a namespace that does not exist is 404.
	call := func(token, ns string, args ...any) (int, []byte) {
		body, _ := json.Marshal(args)
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+s.addr+"/rpc", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(NamespaceHeader, ns)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out json.RawMessage
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if status, out := call(adminToken, "shop", "stream.get", "invoice-1"); status != 200 || !strings.Contains(string(out), `"Issued"`) {
		t.Fatalf("admin reading shop's stream: %d %s", status, out)
	}
	status, out := call(ns.Token, "default", "stream.get", "x-1")
	checkEvError(t, "shop's token naming default", status, out, http.StatusForbidden, "AUTH_UNAUTHORIZED")
	status, out = call(adminToken, "nope", "stream.get", "x-1")
	checkEvError(t, "admin naming a missing namespace", status, out, http.StatusNotFound, "NAMESPACE_NOT_FOUND")
}
