package node

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/node/transport"
)

func loadTLS(t *testing.T, dir, name string) *transport.TLS {
	t.Helper()
	tl, err := transport.NewTLS(
		transport.TLSFiles{
			CertFile: filepath.Join(dir, name+".pem"),
			KeyFile:  filepath.Join(dir, name+"-key.pem"),
			CAFile:   filepath.Join(dir, "ca.pem"),
		},
	)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func TestTLSCluster(t *testing.T) {
	dir := t.TempDir()
	if err := transport.GenerateTLS(dir, []string{"node"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, 3, func(cfg *Config) { cfg.TLS = loadTLS(t, dir, "node") })
	f := c.Followers()[0]
	createNamespace(t, f.Node, "app") // forwarded to the leader over HTTPS
	if _, err := appendOne(ctxT(t), f.Node, "app", "s-1", ""); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged()
	for _, tn := range c.Nodes {
		if msgs := readAll(t, tn.Node, "app", nodeapi.ReadOptions{}); len(msgs) != 1 {
			t.Fatalf("node %s holds %d messages over TLS, want 1", tn.ID(), len(msgs))
		}
	}

	// A node whose certificate another CA signed cannot talk Raft to the
	// cluster, in either direction; one with the cluster's CA can.
	other := t.TempDir()
	if err := transport.GenerateTLS(other, []string{"stranger"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	openPort := func(tl *transport.TLS) *transport.Port {
		p, err := transport.Open("127.0.0.1:0", "", transport.FileCreds(tl), nil, testutil.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	stranger := openPort(loadTLS(t, other, "stranger"))
	l := c.Leader()
	if conn, err := stranger.Dial(raftAddrOf(l), time.Second); err == nil {
		conn.Close()
		t.Fatal("a node with another CA completed a TLS handshake with the leader")
	}
	member := openPort(loadTLS(t, dir, "node"))
	conn, err := member.Dial(raftAddrOf(l), time.Second)
	if err != nil {
		t.Fatalf("a node with the cluster's CA cannot dial the leader: %v", err)
	}
	conn.Close()
	if conn, err := member.Dial(raft.ServerAddress(stranger.Addr().String()), time.Second); err == nil {
		conn.Close()
		t.Fatal("a member accepted the stranger's certificate")
	}
}

// raftAddrOf is the Raft address other nodes dial for tn.
func raftAddrOf(tn *TestNode) raft.ServerAddress { return raft.ServerAddress(tn.Proxy.Addr()) }
