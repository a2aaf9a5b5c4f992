package rpc

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node"
)

// With a follower stopped that reported its version while it was up, a
// leaked token is revoked through the EventoDB API and another through
// Connect, and a credential is created, all on the leader: the version
// gate trusts what the follower last reported. The revoked tokens are
// refused at once.
func TestRevokeWithAServerDown(t *testing.T) {
	t.Parallel()
	c := node.StartTestCluster(t, 3, node.TestClusterOptions{
		Config: func(_ int, cfg *node.Config) { cfg.ReadWait = 2 * time.Second },
		Handler: func(tn *node.TestNode) http.Handler {
			o := defaultOptions
			o.Registerer, o.Gatherer = tn.Registry, tn.Registry
			return NewHandler(tn.Node, o)
		},
	})
	l := c.Leader()
	createAdmin(t, l.Node)
	appToken, _ := nstoken.New("app")
	if _, err := l.CreateNamespace(ctxT(t), &fsmv1.CreateNamespace{Name: "app", TokenHash: nstoken.Hash(appToken)}); err != nil {
		t.Fatal(err)
	}
	s := &server{n: l.Node, addr: l.Addr, reg: l.Registry}
	leakedEv := createCredential(t, s, appToken, "leaked-ev", fsm.RoleWriter, false)
	leakedConnect := createCredential(t, s, appToken, "leaked-connect", fsm.RoleWriter, false)
	testutil.Until(t, waitTimeout, "every server's version to be recorded", func() (bool, string) {
		for _, tn := range c.Nodes {
			if v, ok := l.ServerVersion(tn.ID()); !ok || v < fsm.CredentialsVersion {
				return false, fmt.Sprintf("%s recorded at %d (%v)", tn.ID(), v, ok)
			}
		}
		return true, ""
	})
	c.WaitConverged()
	c.Others(l)[0].Stop()

	if status, code := evCallCode(t, l.Addr, appToken, "token.revoke", `"leaked-ev"`); status != 200 {
		t.Fatalf("EventoDB token.revoke with a follower down: %d %s", status, code)
	}
	if status, out := connectCall(t, l.Addr, appToken, "skald.v1.Credentials/Revoke", `{"name":"leaked-connect"}`, nil); status != 200 {
		t.Fatalf("Credentials.Revoke with a follower down: %d %s", status, out)
	}
	next := createCredential(t, s, appToken, "next", fsm.RoleWriter, false)
	append1 := `{"stream":"order-1","messages":[{"type":"T","data":"e30="}]}`
	for _, tc := range []struct {
		name, token, want string
	}{
		{"revoked through EventoDB", leakedEv, "unauthenticated"},
		{"revoked through Connect", leakedConnect, "unauthenticated"},
		{"created with a follower down", next, ""},
	} {
		if code := connectCode(t, l.Addr, tc.token, "skald.v1.EventStore/Append", append1); code != tc.want {
			t.Fatalf("append with the credential %s: %q, want %q", tc.name, code, tc.want)
		}
	}
}
