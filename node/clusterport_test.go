package node

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/node/transport"
)

// newTestPort opens a cluster port on loopback with credentials derived
// from secret; the test's cleanup closes it.
func newTestPort(t testing.TB, secret string) *transport.Port {
	t.Helper()
	creds, err := transport.NewSecretCreds(secret, "test")
	if err != nil {
		t.Fatal(err)
	}
	p, err := transport.Open("127.0.0.1:0", "", creds, nil, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// testDialer dials members with credentials derived from secret.
func testDialer(t testing.TB, secret string) transport.Dialer {
	t.Helper()
	creds, err := transport.NewSecretCreds(secret, "test")
	if err != nil {
		t.Fatal(err)
	}
	return transport.NewDialer(creds, nil)
}

// stranger is a process speaking hashicorp/raft's own protocol to the
// cluster with some credential, or none.
type stranger struct {
	name  string
	trans *raft.NetworkTransport
}

func strangers(t *testing.T) []stranger {
	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	withSecret := func(secret string) *raft.NetworkTransport {
		tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: newTestPort(
				t,
				secret,
			), MaxPool: 1, Timeout: 2 * time.Second, Logger: hclogFor(testutil.Logger(t), "stranger"),
		})
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	return []stranger{
		{"no credential (plain TCP)", plain},
		{"a wrong secret", withSecret("not-the-cluster-secret")},
	}
}

// An outsider speaking Raft to a member, without the cluster secret or
// with a wrong one, gets every RPC refused before Raft sees it: no term
// moves, no entry is applied (issue 28, finding 1). A member's credentials
// get through, so the test can tell refusal from a deaf port.
func TestRaftPortRefusesStrangers(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	c.WaitConverged()
	f := c.Followers()[0]
	term := f.raft.CurrentTerm()
	index := f.AppliedIndex()
	target := raftAddrOf(f)

	evil, err := fsm.EncodeCommand(
		&fsmv1.Command{Kind: &fsmv1.Command_CreateNamespace{CreateNamespace: &fsmv1.CreateNamespace{
			Name: "intruder", TokenHash: []byte("chosen by the intruder"),
		}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	header := raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax,
		ID:              []byte("intruder"),
		Addr:            []byte("127.0.0.1:1"),
	}
	rpcs := []struct {
		name string
		call func(tr *raft.NetworkTransport) error
	}{
		{"AppendEntries", func(tr *raft.NetworkTransport) error {
			return tr.AppendEntries("x", target, &raft.AppendEntriesRequest{
				RPCHeader: header, Term: term + 1000, PrevLogEntry: uint64(index), PrevLogTerm: term,
				Entries: []*raft.Log{
					{Index: index + 1, Term: term + 1000, Type: raft.LogCommand, Data: evil},
				},
				LeaderCommitIndex: index + 1,
			}, new(raft.AppendEntriesResponse))
		}},
		{"RequestVote", func(tr *raft.NetworkTransport) error {
			return tr.RequestVote(
				"x",
				target,
				&raft.RequestVoteRequest{
					RPCHeader:    header,
					Term:         term + 1000,
					LastLogIndex: index + 1000,
					LastLogTerm:  term + 1000,
				},
				new(raft.RequestVoteResponse),
			)
		}},
		{"RequestPreVote", func(tr *raft.NetworkTransport) error {
			return tr.RequestPreVote(
				"x",
				target,
				&raft.RequestPreVoteRequest{
					RPCHeader:    header,
					Term:         term + 1000,
					LastLogIndex: index + 1000,
					LastLogTerm:  term + 1000,
				},
				new(raft.RequestPreVoteResponse),
			)
		}},
		{"TimeoutNow", func(tr *raft.NetworkTransport) error {
			return tr.TimeoutNow("x", target, &raft.TimeoutNowRequest{RPCHeader: header}, new(raft.TimeoutNowResponse))
		}},
		{"InstallSnapshot", func(tr *raft.NetworkTransport) error {
			return tr.InstallSnapshot("x", target, &raft.InstallSnapshotRequest{
				RPCHeader: header, SnapshotVersion: raft.SnapshotVersionMax, Term: term + 1000,
				LastLogIndex: index + 1000, LastLogTerm: term + 1000, Size: 4,
			}, new(raft.InstallSnapshotResponse), strings.NewReader("evil"))
		}},
	}
	for _, s := range strangers(t) {
		for _, rpc := range rpcs {
			if err := rpc.call(s.trans); err == nil {
				t.Errorf("%s: %s with %s was answered; want the connection refused", s.name, rpc.name, "term+1000")
			}
		}
	}
	if got := f.raft.CurrentTerm(); got != term {
		t.Fatalf("the follower's term moved from %d to %d", term, got)
	}
	if got := l.raft.CurrentTerm(); got != term {
		t.Fatalf("the leader's term moved from %d to %d", term, got)
	}
	for _, tn := range c.Nodes {
		if _, ok := tn.Namespace("intruder"); ok {
			t.Fatalf("node %s applied the intruder's namespace", tn.ID())
		}
	}
	families, err := f.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	refused := -1.0
	for _, fam := range families {
		if fam.GetName() == "skald_cluster_port_refused_connections_total" {
			refused = fam.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if refused < float64(len(rpcs)) {
		t.Fatalf(
			"skald_cluster_port_refused_connections_total = %v on the follower, want at least %d",
			refused,
			len(rpcs),
		)
	}

	// The control: a stale AppendEntries with the cluster's credentials is
	// answered (Success=false, the follower's term), and changes nothing.
	member := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: newTestPort(
			t,
			testClusterSecret,
		), MaxPool: 1, Timeout: 2 * time.Second, Logger: hclogFor(testutil.Logger(t), "member"),
	})
	defer member.Close()
	var resp raft.AppendEntriesResponse
	err = member.AppendEntries("x", target, &raft.AppendEntriesRequest{RPCHeader: header, Term: 0}, &resp)
	if err != nil {
		t.Fatalf("a stale AppendEntries with the cluster's credentials: %v", err)
	}
	if resp.Success || resp.Term != term {
		t.Fatalf("stale AppendEntries answered success=%v term=%d; want false, %d", resp.Success, resp.Term, term)
	}
}

// The peer service (forwarded writes, read index, groups) is on the
// cluster port only, behind the same mutual TLS: a caller with a wrong
// secret, or plain HTTP without TLS, reaches nothing.
func TestPeerServiceRefusesStrangers(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	write := &fsmv1.Command{Kind: &fsmv1.Command_Append{Append: &fsmv1.Append{
		Namespace: "app", Stream: "s-1", Messages: []*fsmv1.NewMessage{{Type: "T", Data: []byte(`{}`)}},
	}}}
	addr := raftAddrOf(l)

	wrong := newPeerClients(testDialer(t, "not-the-cluster-secret").PeerTransport())
	if _, err := wrong.apply(ctxT(t), string(addr), write); err == nil {
		t.Fatal("a peer call with a wrong secret was applied")
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	resp, err := plain.Post("http://"+string(addr)+"/skald.peer.v1.PeerService/Apply", "application/proto", nil)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("plain HTTP to the cluster port answered %s", resp.Status)
	}
	if msgs := readAll(t, l.Node, "app", nodeapi.ReadOptions{}); len(msgs) != 0 {
		t.Fatalf("strangers' peer calls wrote %d messages", len(msgs))
	}

	// The control: the cluster's credentials are served.
	member := newPeerClients(testDialer(t, testClusterSecret).PeerTransport())
	if _, err := member.apply(ctxT(t), string(addr), write); err != nil {
		t.Fatalf("a peer call with the cluster's credentials: %v", err)
	}
	if msgs := readAll(t, l.Node, "app", nodeapi.ReadOptions{}); len(msgs) != 1 {
		t.Fatalf("the member's write: %d messages, want 1", len(msgs))
	}
}

// A forward that fails before its handshake completed was certainly not
// sent, so the follower may try again elsewhere: the failure must reach
// classify as a dial error, however the connection ended.
func TestFailedHandshakeIsNotSent(t *testing.T) {
	closing, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer closing.Close()
	go func() { // accepts and hangs up, as a proxy to a dead node does
		for {
			c, err := closing.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().String()
	gone.Close()
	cases := []struct{ name, addr string }{
		{"connection refused", goneAddr},
		{"hung up during the handshake", closing.Addr().String()},
		{"a server with another secret", newTestPort(t, "another-secret").Addr().String()},
	}
	pc := newPeerClients(testDialer(t, testClusterSecret).PeerTransport())
	cmd := &fsmv1.Command{Kind: &fsmv1.Command_Append{Append: &fsmv1.Append{Namespace: "app", Stream: "s-1"}}}
	for _, tc := range cases {
		_, err := pc.applyBatch(ctxT(t), tc.addr, []*fsmv1.Command{cmd}, "")
		if !errors.Is(err, errNotSent) {
			t.Errorf("%s: %v, want errNotSent", tc.name, err)
		}
	}
}
