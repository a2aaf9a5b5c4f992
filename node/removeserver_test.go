package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/skalddb/skald/node/nodeapi"
)

// TestRemoveUnknownServer: removing an id the configuration does not hold
// is refused with ErrUnknownServer naming the id, on the leader and
// through a follower (forwarded), and proposes nothing; it used to commit
// an unchanged configuration and report success. A real member is still
// removed through a follower.
func TestRemoveUnknownServer(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	l, f := c.Leader(), c.Followers()
	cases := []struct {
		name string
		via  *TestNode
	}{
		{"on the leader", l},
		{"through a follower", f[0]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := l.raft.LastIndex()
			err := tc.via.RemoveServer(ctxT(t), "no-such-server")
			if !errors.Is(err, nodeapi.ErrUnknownServer) || !strings.Contains(err.Error(), `"no-such-server"`) {
				t.Fatalf("remove an unknown id: %v, want ErrUnknownServer naming the id", err)
			}
			if after := l.raft.LastIndex(); after != before {
				t.Fatalf("the leader's last index moved from %d to %d: something was proposed", before, after)
			}
			if servers := configuration(t, l); len(servers) != 3 {
				t.Fatalf("configuration %v, want the 3 servers", servers)
			}
		})
	}

	gone := f[1]
	if err := f[0].RemoveServer(ctxT(t), gone.ID()); err != nil {
		t.Fatalf("remove member %s through a follower: %v", gone.ID(), err)
	}
	servers := configuration(t, l)
	if len(servers) != 2 || servers[gone.ID()] {
		t.Fatalf("configuration after removing %s: %v", gone.ID(), servers)
	}
	// Removed already: now unknown too.
	if err := l.RemoveServer(ctxT(t), gone.ID()); !errors.Is(err, nodeapi.ErrUnknownServer) {
		t.Fatalf("remove %s twice: %v, want ErrUnknownServer", gone.ID(), err)
	}
}

// configuration returns the ids in n's latest Raft configuration.
func configuration(t *testing.T, n *TestNode) map[string]bool {
	t.Helper()
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, s := range cf.Configuration().Servers {
		ids[string(s.ID)] = true
	}
	return ids
}
