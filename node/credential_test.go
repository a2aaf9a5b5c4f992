package node

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// A credential created through a follower is known on every node, and
// once a revocation through a follower returns, no node finds the
// credential: RevokeCredential waits for every server to apply it.
// While a server that has no version recorded does not answer (it may be
// a server too old to know credentials), a create is refused and nothing
// is proposed.
func TestCredentialsThroughRaft(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.VersionInterval = -1 }) // no version is recorded
	createNamespace(t, c.Leader().Node, "app")
	a := c.Followers()[0]
	h := sha256.Sum256([]byte("token"))
	res, err := a.CreateCredential(ctxT(t), &fsmv1.CreateCredential{Namespace: "app", Id: 42, Name: "reporting", Role: uint32(fsm.RoleReader), TokenHash: h[:]})
	if err != nil || res.GetCredential().GetName() != "reporting" || res.Index == 0 {
		t.Fatalf("create through a follower: %+v, %v", res, err)
	}
	c.WaitConverged()
	for _, n := range c.Nodes {
		cred, _, ok := n.Credential("app", 42)
		if !ok || cred.Role != fsm.RoleReader || !bytes.Equal(cred.TokenHash, h[:]) {
			t.Fatalf("%s: credential 42 = %+v, %v", n.ID(), cred, ok)
		}
	}
	if _, err := a.CreateCredential(ctxT(t), &fsmv1.CreateCredential{Namespace: "app", Id: 43, Name: "reporting", Role: uint32(fsm.RoleReader), TokenHash: h[:]}); !errors.Is(err, fsm.ErrCredentialExists) {
		t.Fatalf("a taken name through a follower: %v, want ErrCredentialExists", err)
	}
	if _, err := a.RevokeCredential(ctxT(t), &fsmv1.RevokeCredential{Namespace: "app", Name: "reporting"}); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	for _, n := range c.Nodes { // no wait: the revoke waited
		if _, _, ok := n.Credential("app", 42); ok {
			t.Fatalf("%s still holds the revoked credential when the revoke returned", n.ID())
		}
	}
	if _, err := a.RevokeCredential(ctxT(t), &fsmv1.RevokeCredential{Namespace: "app", Name: "reporting"}); !errors.Is(err, fsm.ErrCredentialNotFound) {
		t.Fatalf("a second revoke through a follower: %v, want ErrCredentialNotFound", err)
	}

	down := c.Followers()[1]
	down.Stop()
	before := c.Leader().AppliedIndex()
	_, err = c.Leader().CreateCredential(ctxT(t), &fsmv1.CreateCredential{Namespace: "app", Id: 44, Name: "later", Role: uint32(fsm.RoleReader), TokenHash: h[:]})
	if !errors.Is(err, nodeapi.ErrUpgradeRequired) {
		t.Fatalf("create while a server is down: %v, want ErrUpgradeRequired", err)
	}
	if _, _, ok := c.Leader().Credential("app", 44); ok || c.Leader().AppliedIndex() != before {
		t.Fatalf("a refused create was applied (index %d, was %d)", c.Leader().AppliedIndex(), before)
	}
}
