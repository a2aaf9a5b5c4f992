package client_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestCredentials creates, lists and revokes credentials through the
// client on a 3-node cluster, and checks what each may do.
func TestCredentials(t *testing.T) {
	cl := testcluster.Start(t, 3)
	admin := newTestClient(t, cl.Endpoints(), "")
	owner := namespaceClient(t, admin, cl.Endpoints(), "shop")
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	made, err := owner.CreateCredential(ctxT(t), client.NewCredential{Name: "billing", Role: client.RoleWriter, Scope: []string{"invoice"}, ExpiresAt: expires})
	if err != nil || made.Token == "" || made.Name != "billing" || made.Role != client.RoleWriter || !made.ExpiresAt.Equal(expires) {
		t.Fatalf("create: %+v, %v", made, err)
	}
	billing := newTestClient(t, cl.Endpoints(), made.Token)
	if _, err := billing.Append(ctxT(t), "invoice-1", []client.NewMessage{event(1)}); err != nil {
		t.Fatalf("append in scope: %v", err)
	}
	if _, err := billing.Append(ctxT(t), "order-1", []client.NewMessage{event(1)}); !errors.Is(err, client.ErrPermissionDenied) {
		t.Fatalf("append out of scope: %v, want ErrPermissionDenied", err)
	}
	if _, err := billing.CreateCredential(ctxT(t), client.NewCredential{Name: "x", Role: client.RoleReader}); !errors.Is(err, client.ErrPermissionDenied) {
		t.Fatalf("a writer creating a credential: %v, want ErrPermissionDenied", err)
	}
	if _, err := owner.CreateCredential(ctxT(t), client.NewCredential{Name: "billing", Role: client.RoleReader}); !errors.Is(err, client.ErrAlreadyExists) {
		t.Fatalf("a taken name: %v, want ErrAlreadyExists", err)
	}
	// The admin reaches the namespace by naming it.
	if _, err := admin.CreateCredential(ctxT(t), client.NewCredential{Namespace: "shop", Name: "reports", Role: client.RoleReader}); err != nil {
		t.Fatalf("admin creating in shop: %v", err)
	}
	list, err := owner.Credentials(ctxT(t), "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list {
		names = append(names, c.Name+":"+c.Role.String())
	}
	if want := []string{"billing:writer", "initial:owner", "reports:reader"}; !slices.Equal(names, want) {
		t.Fatalf("list: %v, want %v", names, want)
	}
	if err := owner.RevokeCredential(ctxT(t), "", "billing"); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if _, err := billing.Append(ctxT(t), "invoice-1", []client.NewMessage{event(2)}); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("append with a revoked credential: %v, want ErrUnauthenticated", err)
	}
	if err := owner.RevokeCredential(ctxT(t), "", "billing"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a second revoke: %v, want ErrNotFound", err)
	}
}
