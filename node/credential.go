package node

import (
	"context"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Credentials (fsm/credential.go) are entries of kinds older binaries do
// not know: Apply proposes a create only once every server of the
// configuration is known to apply fsm.CredentialsVersion (the version
// gate, version.go), so a rolling upgrade never puts one in the log that
// a replica would refuse. A revocation has no version (fsm/kinds.go): a
// server that is down, paused or older never holds it back.

// revokeWait bounds how long RevokeCredential waits for every server to
// apply the revocation.
const revokeWait = 5 * time.Second

// CreateCredential is Apply for a new credential.
func (n *Node) CreateCredential(ctx context.Context, c *fsmv1.CreateCredential) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_CreateCredential{CreateCredential: c}})
}

// RevokeCredential is Apply for a revocation, and then waits (up to 5 s,
// or ctx) until every server of the configuration has applied it, so
// that no node admits the credential once the call returns. A server
// that does not answer in time is logged; it refuses the credential from
// the moment it applies the entry.
func (n *Node) RevokeCredential(ctx context.Context, c *fsmv1.RevokeCredential) (*fsmv1.Result, error) {
	res, err := n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_RevokeCredential{RevokeCredential: c}})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, revokeWait)
	defer cancel()
	if lagging := n.waitAppliedEverywhere(wctx, res.Index); len(lagging) > 0 {
		n.log.Warn("a revoked credential: servers did not confirm the revocation in time; each refuses it once it applies the entry",
			"namespace", c.Namespace, "credential", c.Name, "index", res.Index, "servers", lagging)
	}
	return res, nil
}

// waitAppliedEverywhere waits until every server of the configuration
// reports an applied index of at least index, or ctx ends; it returns the
// servers that had not.
func (n *Node) waitAppliedEverywhere(ctx context.Context, index uint64) []string {
	if err := n.waitApplied(ctx, index); err != nil {
		return []string{n.id}
	}
	servers, err := n.Servers()
	if err != nil {
		return []string{"(configuration unknown)"}
	}
	var lagging []string
	for _, s := range servers {
		if string(s.ID) == n.id {
			continue
		}
		for {
			resp, err := n.peers.stats(ctx, n.serverAddr(s))
			if err == nil && resp.GetAppliedIndex() >= index {
				break
			}
			if n.sleepCtx(ctx, 10*time.Millisecond) != nil {
				lagging = append(lagging, string(s.ID))
				break
			}
		}
	}
	return lagging
}

// Credential returns namespace name's credential of id as this node has
// applied it, and the namespace's internal id.
func (n *Node) Credential(name string, id uint64) (fsm.CredentialInfo, uint64, bool) {
	return n.store.Credential(name, id)
}

// Credentials returns namespace name's credentials as this node has
// applied them.
func (n *Node) Credentials(name string) ([]fsm.CredentialInfo, error) {
	return n.store.Credentials(name)
}
