package rpc

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/internal/testutil"
	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

// TestTransferLeadershipNamesNewLeader: the reply names the new leader,
// every time (it used to be empty while the old leader had not yet heard
// from its successor).
func TestTransferLeadershipNamesNewLeader(t *testing.T) {
	servers, _ := clusterOfThree(t)
	leader := func() *server {
		var l *server
		testutil.Eventually(t, waitTimeout, "one leader", func() bool {
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
	nosuch := "nosuch"
	_, err := newClients(leader(), protocols[0], adminToken).cluster.TransferLeadership(ctxT(t), connect.NewRequest(&skaldv1.TransferLeadershipRequest{ToId: &nosuch}))
	wantCode(t, "transfer to a server not in the cluster", err, connect.CodeNotFound)
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

// TestClusterStatusReportsEveryAppliedIndex: Status, asked on a follower,
// reports each server's own applied index (followers used to show 0).
func TestClusterStatusReportsEveryAppliedIndex(t *testing.T) {
	servers, l := clusterOfThree(t)
	var f *server
	for _, s := range servers {
		if s != l {
			f = s
		}
		// Membership registers each node's API address; this harness has
		// none.
		if err := l.n.RegisterAPIAddress(ctxT(t), s.n.ID(), s.addr); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]uint64{}
	for _, s := range servers {
		testutil.Eventually(t, waitTimeout, "a state change applied", func() bool { return s.n.AppliedIndex() > 0 })
		before[s.n.ID()] = s.n.AppliedIndex()
	}
	byID := map[string]*server{}
	for _, s := range servers {
		byID[s.n.ID()] = s
	}
	// A server that does not answer within Status's second shows 0
	// (unknown); on a loaded machine that can happen, so ask again until
	// every server answered. What a server reports must lie between the
	// values read before and after the call: its applied index only grows.
	testutil.Eventually(t, waitTimeout, "every applied index reported", func() bool {
		st, err := newClients(f, protocols[0], adminToken).cluster.Status(ctxT(t), connect.NewRequest(&skaldv1.StatusRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Msg.Servers) != len(servers) {
			t.Fatalf("status lists %d servers, want %d", len(st.Msg.Servers), len(servers))
		}
		all := true
		for _, srv := range st.Msg.Servers {
			s := byID[srv.Id]
			if s == nil {
				t.Fatalf("status lists unknown server %s", srv.Id)
			}
			if srv.AppliedIndex == 0 {
				all = false
				continue
			}
			if after := s.n.AppliedIndex(); srv.AppliedIndex < before[srv.Id] || srv.AppliedIndex > after {
				t.Fatalf("server %s: status says applied index %d, the node was at %d before and %d after", srv.Id, srv.AppliedIndex, before[srv.Id], after)
			}
		}
		return all
	})
}

// TestRemoveUnknownServerIsNotFound: Cluster.RemoveServer of an id not in
// the cluster answers NotFound naming it, on the leader and on a follower
// (which forwards), in every protocol; it used to answer OK.
func TestRemoveUnknownServerIsNotFound(t *testing.T) {
	servers, l := clusterOfThree(t)
	var f *server
	for _, s := range servers {
		if s != l {
			f = s
		}
	}
	for _, via := range []struct {
		name string
		s    *server
	}{{"leader", l}, {"follower", f}} {
		for _, p := range protocols {
			t.Run(via.name+"/"+p.name, func(t *testing.T) {
				_, err := newClients(via.s, p, adminToken).cluster.RemoveServer(ctxT(t), connect.NewRequest(&skaldv1.RemoveServerRequest{Id: "nosuch"}))
				ce := wantCode(t, "remove a server not in the cluster", err, connect.CodeNotFound)
				if want := `id: no server "nosuch" in the cluster`; !strings.Contains(ce.Message(), want) {
					t.Fatalf("message %q, want it to contain %q", ce.Message(), want)
				}
			})
		}
	}
	st, err := newClients(l, protocols[0], adminToken).cluster.Status(ctxT(t), connect.NewRequest(&skaldv1.StatusRequest{}))
	if err != nil || len(st.Msg.Servers) != 3 {
		t.Fatalf("status after the refused removals: %v %v, want 3 servers", st, err)
	}
}
