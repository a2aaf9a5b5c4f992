package node

import (
	"errors"
	"fmt"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// DefaultMaxPerNamespace is the default of Config.MaxGroupsPerNamespace
// and Config.MaxCredentialsPerNamespace.
const DefaultMaxPerNamespace = 1000

// checkSettingsRoom refuses, on the leader before proposing, a create of a
// subscription group or a credential in a namespace that holds its limit
// of them already (Config.MaxGroupsPerNamespace,
// MaxCredentialsPerNamespace). The count is this leader's applied state:
// a check here, unlike one in apply, never makes replicas of different
// versions or settings decide differently. A namespace that does not
// exist passes: apply refuses the create.
func (n *Node) checkSettingsRoom(cmd *fsmv1.Command) error {
	var (
		ns, what string
		limit    int
		count    func() (int, error)
	)
	switch c := cmd.Kind.(type) {
	case *fsmv1.Command_CreateGroup:
		ns, what, limit = c.CreateGroup.Namespace, "subscription groups", n.cfg.MaxGroupsPerNamespace
		count = func() (int, error) {
			v, err := n.store.View(ns)
			if err != nil {
				return 0, err
			}
			defer v.Close()
			return v.GroupCount(limit)
		}
	case *fsmv1.Command_CreateCredential:
		ns, what, limit = c.CreateCredential.Namespace, "credentials", n.cfg.MaxCredentialsPerNamespace
		count = func() (int, error) {
			creds, err := n.store.Credentials(ns)
			return len(creds), err
		}
	default:
		return nil
	}
	if limit < 0 {
		return nil
	}
	have, err := count()
	switch {
	case errors.Is(err, fsm.ErrNamespaceNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("node: count the %s of namespace %q: %w", what, ns, err)
	case have >= limit:
		return &nodeapi.SettingsLimitError{Namespace: ns, What: what, Limit: int64(limit)}
	}
	return nil
}
