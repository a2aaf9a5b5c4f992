package client_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestRetention sets policies through the client on a 3-node cluster,
// lists them, waits for the leader's expiry to cap a stream and to age
// out another on every member, and checks the refusals' errors.
func TestRetention(t *testing.T) {
	cl := testcluster.Start(t, 3)
	admin := newTestClient(t, cl.Endpoints(), "")
	c := namespaceClient(t, admin, cl.Endpoints(), "kept")
	if replaced, err := c.SetRetentionPolicy(ctxT(t), "", client.RetentionPolicy{Scope: client.ScopeStream, Name: "cart-1", MaxCount: 2}); err != nil || replaced {
		t.Fatalf("set a stream policy: %v, replaced %v", err, replaced)
	}
	if _, err := admin.SetRetentionPolicy(ctxT(t), "kept", client.RetentionPolicy{Scope: client.ScopeCategory, Name: "temp", MaxAge: 200 * time.Millisecond}); err != nil {
		t.Fatalf("set a category policy as admin: %v", err)
	}
	ps, err := c.RetentionPolicies(ctxT(t), "", client.WithLinearizable()) // admin wrote one
	want := []client.RetentionPolicy{{Scope: client.ScopeCategory, Name: "temp", MaxAge: 200 * time.Millisecond}, {Scope: client.ScopeStream, Name: "cart-1", MaxCount: 2}}
	if err != nil || !slices.Equal(ps, want) {
		t.Fatalf("policies %+v (err %v), want %+v", ps, err, want)
	}
	appendN(t, c, "cart-1", "Added", 5)
	appendN(t, c, "temp-1", "Tick", 3)
	// Reads go round robin: three in a row ask every member.
	holds := func(stream string, want []int64) bool {
		for range 3 {
			msgs, err := c.ReadStream(ctxT(t), client.StreamQuery{Stream: stream, Limit: -1}, client.WithLinearizable())
			if err != nil {
				t.Fatalf("read %s: %v", stream, err)
			}
			var pos []int64
			for _, m := range msgs {
				pos = append(pos, m.Position)
			}
			if !slices.Equal(pos, want) {
				return false
			}
		}
		return true
	}
	testcluster.WaitFor(t, "expiry on every member", func() bool {
		return holds("cart-1", []int64{3, 4}) && holds("temp-1", nil)
	})
	for _, tc := range []struct {
		name string
		c    *client.Client
		ns   string
		p    client.RetentionPolicy
		err  error
	}{
		{"negative count", c, "", client.RetentionPolicy{Scope: client.ScopeStream, Name: "cart-1", MaxCount: -1}, client.ErrInvalidArgument},
		{"negative age", c, "", client.RetentionPolicy{Scope: client.ScopeNamespace, MaxAge: -time.Second}, client.ErrInvalidArgument},
		{"reserved namespace", admin, "", client.RetentionPolicy{Scope: client.ScopeNamespace, MaxCount: 1}, client.ErrInvalidArgument},
		{"unknown namespace", admin, "nope", client.RetentionPolicy{Scope: client.ScopeNamespace, MaxCount: 1}, client.ErrNotFound},
		{"another namespace", c, "other", client.RetentionPolicy{Scope: client.ScopeNamespace, MaxCount: 1}, client.ErrPermissionDenied},
	} {
		if _, err := tc.c.SetRetentionPolicy(ctxT(t), tc.ns, tc.p); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
}
