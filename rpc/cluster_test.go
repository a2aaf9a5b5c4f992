package rpc

import (
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

// TestTransferLeadershipNamesNewLeader: the reply names the new leader,
// every time (it used to be empty while the old leader had not yet heard
// from its successor).
func TestTransferLeadershipNamesNewLeader(t *testing.T) {
	servers, _ := clusterOfThree(t)
	leader := func() *server {
		var l *server
		waitFor(t, "one leader", func() bool {
			for _, s := range servers {
				if s.n.IsLeader() {
					l = s
					return true
				}
			}
			return false
		})
		return l
	}
	for i := range 5 {
		old := leader()
		resp, err := newClients(old, protocols[0], adminToken).cluster.TransferLeadership(ctxT(t), connect.NewRequest(&skaldv1.TransferLeadershipRequest{}))
		if err != nil {
			t.Fatalf("transfer %d: %v", i, err)
		}
		got := resp.Msg.LeaderId
		if got == "" || got == old.n.ID() {
			t.Fatalf("transfer %d from %s: reply names leader %q", i, old.n.ID(), got)
		}
		known := false
		for _, s := range servers {
			known = known || s.n.ID() == got
		}
		if !known {
			t.Fatalf("transfer %d: reply names %q, not a member", i, got)
		}
	}
}
