package rpc

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/nstoken"
)

// TestRetentionAPI sets, lists and clears retention policies with a
// namespace token and the admin token, checks that an expiry applies
// them, and that every refusal has its code and changes nothing.
func TestRetentionAPI(t *testing.T) {
	t.Parallel()
	s := single(t)
	ctx := ctxT(t)
	admin := newClients(s, protocols[0], adminToken)
	created, err := admin.namespaces.Create(ctx, connect.NewRequest(&skaldv1.CreateRequest{Name: "shop"}))
	if err != nil {
		t.Fatal(err)
	}
	own := newClients(s, protocols[0], created.Msg.Token)
	policy := func(scope skaldv1.RetentionScope, name string, age time.Duration, count int64) *skaldv1.RetentionPolicy {
		p := &skaldv1.RetentionPolicy{Scope: scope, Name: name, MaxCount: count}
		if age != 0 {
			p.MaxAge = durationpb.New(age)
		}
		return p
	}
	set := func(c clients, ns string, p *skaldv1.RetentionPolicy) (*connect.Response[skaldv1.SetRetentionPolicyResponse], error) {
		return c.namespaces.SetRetentionPolicy(ctx, connect.NewRequest(&skaldv1.SetRetentionPolicyRequest{Namespace: ns, Policy: p}))
	}
	list := func() []string {
		t.Helper()
		r, err := own.namespaces.ListRetentionPolicies(ctx, connect.NewRequest(&skaldv1.ListRetentionPoliciesRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range r.Msg.Policies {
			out = append(out, p.Scope.String()+" "+p.Name+" "+p.MaxAge.AsDuration().String()+" "+strconv.FormatInt(p.MaxCount, 10))
		}
		return out
	}

	if r, err := set(own, "", policy(skaldv1.RetentionScope_RETENTION_SCOPE_STREAM, "cart-1", 0, 2)); err != nil || r.Msg.Replaced || r.Msg.Index == 0 {
		t.Fatalf("set a stream policy with the namespace token: %v, %v", r, err)
	}
	msgs := make([]*skaldv1.NewMessage, 5)
	for i := range msgs {
		msgs[i] = &skaldv1.NewMessage{Type: "T", Data: []byte(`{}`)}
	}
	if _, err := own.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: "cart-1", Messages: msgs})); err != nil {
		t.Fatal(err)
	}
	if e, err := s.n.ExpireNow(ctx, "shop"); err != nil || e.GetExpiry().GetMessagesDeleted() != 3 {
		t.Fatalf("expiry: %+v, %v; want 3 removed", e, err)
	}
	rs, err := own.events.ReadStream(ctx, connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "cart-1"}))
	if err != nil || len(rs.Msg.Messages) != 2 || rs.Msg.Messages[0].Position != 3 {
		t.Fatalf("cart-1 after expiry: %v, %v; want positions 3 and 4", rs, err)
	}
	info, err := own.namespaces.Get(ctx, connect.NewRequest(&skaldv1.GetRequest{Name: "shop"}))
	if err != nil || info.Msg.MessageCount != 2 {
		t.Fatalf("namespace counts after expiry: %v, %v; want 2 messages", info, err)
	}
	if _, err := set(admin, "shop", policy(skaldv1.RetentionScope_RETENTION_SCOPE_CATEGORY, "cart", time.Hour, 0)); err != nil {
		t.Fatalf("set a category policy with the admin token: %v", err)
	}
	want := []string{"RETENTION_SCOPE_CATEGORY cart 1h0m0s 0", "RETENTION_SCOPE_STREAM cart-1 0s 2"}
	if got := list(); !equalStrings(got, want) {
		t.Fatalf("policies %q, want %q", got, want)
	}

	for _, tc := range []struct {
		name string
		c    clients
		ns   string
		p    *skaldv1.RetentionPolicy
		code connect.Code
	}{
		{"negative count", own, "", policy(skaldv1.RetentionScope_RETENTION_SCOPE_STREAM, "cart-1", 0, -1), connect.CodeInvalidArgument},
		{"negative age", own, "", policy(skaldv1.RetentionScope_RETENTION_SCOPE_NAMESPACE, "", -time.Second, 0), connect.CodeInvalidArgument},
		{"category naming a stream", own, "", policy(skaldv1.RetentionScope_RETENTION_SCOPE_CATEGORY, "cart-1", 0, 1), connect.CodeInvalidArgument},
		{"no scope", own, "", policy(0, "", 0, 1), connect.CodeInvalidArgument},
		{"no policy", own, "", nil, connect.CodeInvalidArgument},
		{"the reserved namespace", admin, "", policy(skaldv1.RetentionScope_RETENTION_SCOPE_NAMESPACE, "", time.Hour, 0), connect.CodeInvalidArgument},
		{"the reserved namespace by name", admin, nstoken.AdminNamespace, policy(skaldv1.RetentionScope_RETENTION_SCOPE_NAMESPACE, "", time.Hour, 0), connect.CodeInvalidArgument},
		{"an unknown namespace", admin, "nope", policy(skaldv1.RetentionScope_RETENTION_SCOPE_NAMESPACE, "", time.Hour, 0), connect.CodeNotFound},
		{"another namespace's", own, "other", policy(skaldv1.RetentionScope_RETENTION_SCOPE_NAMESPACE, "", time.Hour, 0), connect.CodePermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := set(tc.c, tc.ns, tc.p)
			if connect.CodeOf(err) != tc.code {
				t.Fatalf("got %v, want %v", err, tc.code)
			}
			if got := list(); !equalStrings(got, want) {
				t.Fatalf("policies after a refusal %q, want %q", got, want)
			}
		})
	}
	if _, err := admin.namespaces.ListRetentionPolicies(ctx, connect.NewRequest(&skaldv1.ListRetentionPoliciesRequest{Namespace: "nope"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("list of an unknown namespace: %v, want NotFound", err)
	}
	// No limit removes the scope's policy.
	if r, err := set(own, "", policy(skaldv1.RetentionScope_RETENTION_SCOPE_STREAM, "cart-1", 0, 0)); err != nil || !r.Msg.Replaced {
		t.Fatalf("clear: %v, %v", r, err)
	}
	if got := list(); !equalStrings(got, want[:1]) {
		t.Fatalf("policies after the clear %q, want %q", got, want[:1])
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRetentionEventoDB drives the ns.setRetention and ns.retention
// extensions of /rpc, with each refusal's status and code.
func TestRetentionEventoDB(t *testing.T) {
	t.Parallel()
	s := single(t)
	created, err := newClients(s, protocols[0], adminToken).namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: "shop"}))
	if err != nil {
		t.Fatal(err)
	}
	c, admin := evClient{t, s.addr, created.Msg.Token}, evClient{t, s.addr, adminToken}
	var set struct{ Replaced bool }
	c.ok(&set, "ns.setRetention", map[string]any{"scope": "stream", "name": "cart-1", "maxCount": 2})
	if set.Replaced {
		t.Fatal("a first policy said it replaced one")
	}
	admin.ok(&set, "ns.setRetention", map[string]any{"namespace": "shop", "scope": "category", "name": "cart", "maxAgeMs": 3600000})
	var list struct {
		Policies []struct {
			Scope, Name        string
			MaxAgeMs, MaxCount int64
		}
	}
	c.ok(&list, "ns.retention", map[string]any{})
	if got := fmt.Sprint(list.Policies); got != "[{category cart 3600000 0} {stream cart-1 0 2}]" {
		t.Fatalf("ns.retention: %s", got)
	}
	c.fails(400, "INVALID_REQUEST", "ns.setRetention", map[string]any{"scope": "stream", "name": "cart-1", "maxCount": -1})
	c.fails(400, "INVALID_REQUEST", "ns.setRetention", map[string]any{"scope": "namespace", "maxAgeMs": -5})
	c.fails(400, "INVALID_REQUEST", "ns.setRetention", map[string]any{"scope": "galaxy"})
	c.fails(403, "AUTH_UNAUTHORIZED", "ns.setRetention", map[string]any{"namespace": "other", "scope": "namespace", "maxCount": 1})
	admin.fails(400, "INVALID_REQUEST", "ns.setRetention", map[string]any{"scope": "namespace", "maxCount": 1})
	admin.fails(404, "NAMESPACE_NOT_FOUND", "ns.setRetention", map[string]any{"namespace": "nope", "scope": "namespace", "maxCount": 1})
	admin.fails(404, "NAMESPACE_NOT_FOUND", "ns.retention", map[string]any{"namespace": "nope"})
	c.ok(&set, "ns.setRetention", map[string]any{"scope": "stream", "name": "cart-1"})
	if !set.Replaced {
		t.Fatal("removing a policy did not say it replaced one")
	}
	c.ok(&list, "ns.retention", map[string]any{})
	if len(list.Policies) != 1 {
		t.Fatalf("ns.retention after the removal: %v", list.Policies)
	}
}
