package rpc

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node"
	"github.com/skalddb/skald/node/nodeapi"
)

// TestTransferLeadershipNamesNewLeader: the reply names the new leader,
// every time (it used to be empty while the old leader had not yet heard
// from its successor).
func TestTransferLeadershipNamesNewLeader(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// TestClusterStatusHealthThroughAFollower: Status asked on a follower
// judges every server as the leader's autopilot would: the live leader
// and the other follower healthy, each with its last contact (it used to
// say healthy false and last contact null for every other server). A
// killed server is marked unreachable and unhealthy, with no applied
// index, through the follower and through the leader, and the others
// stay healthy. Names come from Options (gossip in the server).
func TestClusterStatusHealthThroughAFollower(t *testing.T) {
	t.Parallel()
	names := map[string]string{}
	opts := defaultOptions
	opts.Names = func(id string) string { return names[id] }
	c := node.StartTestCluster(t, 3, node.TestClusterOptions{
		Handler: func(tn *node.TestNode) http.Handler {
			o := opts
			o.Registerer, o.Gatherer = tn.Registry, tn.Registry
			o.NodeName = "own-name-of-" + tn.Addr
			return NewHandler(tn.Node, o)
		},
	})
	l := c.Leader()
	createAdmin(t, l.Node)
	fs := c.Followers()
	via, victim := fs[0], fs[1]
	names[l.ID()] = "the-leader" // the victim's name is unknown to gossip here
	status := func(tn *node.TestNode) *skaldv1.StatusResponse {
		st, err := newClients(&server{n: tn.Node, addr: tn.Addr}, protocols[0], adminToken).cluster.Status(ctxT(t), connect.NewRequest(&skaldv1.StatusRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		return st.Msg
	}
	type want struct {
		healthy, unreachable, contact, applied bool
		name                                   string
	}
	check := func(st *skaldv1.StatusResponse, wants map[string]want) string {
		if st.LeaderId != l.ID() || len(st.Servers) != len(wants) {
			return fmt.Sprintf("leader %s, %d servers: %v", st.LeaderId, len(st.Servers), st)
		}
		for _, s := range st.Servers {
			w := wants[s.Id]
			got := want{s.Healthy, s.Unreachable, s.LastContact != nil, s.AppliedIndex > 0, s.Name}
			if got != w {
				return fmt.Sprintf("server %s: %+v, want %+v", s.Id, got, w)
			}
			if s.Id == l.ID() && s.LastContact != nil && s.LastContact.AsDuration() != 0 {
				return fmt.Sprintf("the leader's last contact is %v, want 0", s.LastContact.AsDuration())
			}
		}
		return ""
	}
	all := map[string]want{
		l.ID():      {healthy: true, contact: true, applied: true, name: "the-leader"},
		via.ID():    {healthy: true, contact: true, applied: true, name: "own-name-of-" + via.Addr},
		victim.ID(): {healthy: true, contact: true, applied: true},
	}
	// A server that misses Status's second on a loaded machine shows
	// unreachable: ask again until the cluster's steady state shows.
	testutil.Until(t, waitTimeout, "every server healthy through the follower", func() (bool, string) {
		msg := check(status(via), all)
		return msg == "", msg
	})
	// (check holds every server's last contact, the leader's 0: asking
	// again here failed when a server missed that second of a new call.)

	victimID := victim.ID()
	victim.Kill()
	down := map[string]want{
		l.ID():   {healthy: true, contact: true, applied: true, name: "the-leader"},
		via.ID(): {healthy: true, contact: true, applied: true, name: "own-name-of-" + via.Addr},
		victimID: {unreachable: true},
	}
	testutil.Until(t, waitTimeout, "the killed server unreachable through the follower", func() (bool, string) {
		msg := check(status(via), down)
		return msg == "", msg
	})
	// The leader knows its own name and, here, no one else's.
	down[via.ID()] = want{healthy: true, contact: true, applied: true}
	testutil.Until(t, waitTimeout, "the killed server unreachable through the leader", func() (bool, string) {
		msg := check(status(l), down)
		return msg == "", msg
	})
}

// reference judges the servers against the leader's answer, or, when the
// leader did not answer, against the freshest answer: highest term, then
// longest log.
func TestClusterStatusReference(t *testing.T) {
	t.Parallel()
	p := func(term, last uint64) nodeapi.Progress { return nodeapi.Progress{Term: term, LastIndex: last} }
	cases := []struct {
		name     string
		progress map[string]nodeapi.Progress
		leader   string
		want     nodeapi.Progress
		ok       bool
	}{
		{"the leader answered", map[string]nodeapi.Progress{"l": p(3, 10), "a": p(3, 12)}, "l", p(3, 10), true},
		{"the leader did not answer", map[string]nodeapi.Progress{"a": p(3, 10), "b": p(3, 12), "c": p(2, 40)}, "l", p(3, 12), true},
		{"no leader known", map[string]nodeapi.Progress{"a": p(4, 1), "b": p(3, 12)}, "", p(4, 1), true},
		{"nobody answered", map[string]nodeapi.Progress{}, "l", nodeapi.Progress{}, false},
	}
	for _, c := range cases {
		got, ok := reference(c.progress, c.leader)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %+v %v, want %+v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
