package node

import (
	"errors"
	"fmt"
	"sync"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// DefaultMaxPerNamespace is the default of Config.MaxGroupsPerNamespace
// and Config.MaxCredentialsPerNamespace.
const DefaultMaxPerNamespace = 1000

// settingsReservations counts, per namespace and kind, the creates of
// groups and credentials this leader has proposed and not yet seen
// answered, so that concurrent creates cannot pass a limit together:
// each one counts the applied state plus those still in flight.
type settingsReservations struct {
	mu      sync.Mutex
	pending map[string]int // namespace + "\x00" + what
}

// checkSettingsRoom refuses, on the leader before proposing, a create of a
// subscription group or a credential in a namespace that holds its limit
// of them already (Config.MaxGroupsPerNamespace,
// MaxCredentialsPerNamespace), counting the applied state and the creates
// this leader has in flight. The count is this leader's: a check here,
// unlike one in apply, never makes replicas of different versions or
// settings decide differently. A namespace that does not exist passes:
// apply refuses the create. On success the caller must call release once
// the proposal is answered (or certainly will not apply).
func (n *Node) checkSettingsRoom(cmd *fsmv1.Command) (release func(), err error) {
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
		return func() {}, nil
	}
	if limit < 0 {
		return func() {}, nil
	}
	r := &n.settingsRes
	key := ns + "\x00" + what
	// Count under the lock: a create releases its reservation only after
	// it applied, so every create is either in the count or pending.
	r.mu.Lock()
	defer r.mu.Unlock()
	have, err := count()
	switch {
	case errors.Is(err, fsm.ErrNamespaceNotFound):
		return func() {}, nil
	case err != nil:
		return nil, fmt.Errorf("node: count the %s of namespace %q: %w", what, ns, err)
	case have+r.pending[key] >= limit:
		return nil, &nodeapi.SettingsLimitError{Namespace: ns, What: what, Limit: int64(limit)}
	}
	if r.pending == nil {
		r.pending = map[string]int{}
	}
	r.pending[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.pending[key]--; r.pending[key] <= 0 {
				delete(r.pending, key)
			}
		})
	}, nil
}
