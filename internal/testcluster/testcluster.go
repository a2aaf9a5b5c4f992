// Package testcluster runs a real Skald cluster inside a test process for
// the client's and the console's tests: N nodes on 127.0.0.1 with real
// Raft over TCP, Pebble on disk and the full API handler (rpc.NewHandler)
// behind an h2c server.
// A test kills nodes and transfers leadership; every wait has a deadline.
package testcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/node"
	"github.com/skalddb/skald/rpc"
)

// AdminToken is the admin token of every test cluster.
const AdminToken = "ns_ZGVmYXVsdA_0000000000000000000000000000000000000000000000000000000000000000"

// Timeout bounds every wait of the package.
const Timeout = 20 * time.Second

// Node is one member: its node and API server.
type Node struct {
	*node.Node // nil once killed
	Addr       string
	srv        *http.Server
}

// T is what the package needs of a test: testing.TB has it, and so has
// Main for a cluster shared by a package's examples.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

// Cluster is a running test cluster.
type Cluster struct {
	t     T
	Nodes []*Node
	// CAFile is the CA of a TLS cluster (StartTLS), "" otherwise.
	CAFile string
	tlsDir string
}

// Start starts size nodes (the first bootstraps, the leader adds the others
// as voters), creates the admin namespace and returns once every node
// knows the leader.
func Start(t T, size int) *Cluster {
	t.Helper()
	return start(t, &Cluster{t: t}, size)
}

// StartTLS is Start with TLS on the API port (HTTPS, HTTP/2 by ALPN) and
// mutual TLS between the nodes, certificates from node.GenerateTLS for
// 127.0.0.1 signed by CAFile.
func StartTLS(t T, size int) *Cluster {
	t.Helper()
	dir := t.TempDir()
	var names []string
	for i := range size {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	if err := node.GenerateTLS(dir, names, []string{"127.0.0.1"}); err != nil {
		t.Fatalf("generate TLS: %v", err)
	}
	return start(t, &Cluster{t: t, CAFile: filepath.Join(dir, "ca.pem"), tlsDir: dir}, size)
}

func start(t T, c *Cluster, size int) *Cluster {
	t.Helper()
	for i := range size {
		c.Nodes = append(c.Nodes, c.start(i == 0))
	}
	WaitFor(t, "the bootstrap node to lead", c.Nodes[0].IsLeader)
	for _, n := range c.Nodes[1:] {
		WaitFor(t, "adding a voter", func() bool {
			l := c.leaderOrNil()
			if l == nil {
				return false
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return l.AddVoter(ctx, n.ID(), n.RaftAddr()) == nil && l.RegisterAPIAddress(ctx, n.ID(), n.Addr) == nil
		})
	}
	l := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if _, err := l.CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: nstoken.AdminNamespace, TokenHash: nstoken.Hash(AdminToken)}); err != nil {
		t.Fatalf("create the admin namespace: %v", err)
	}
	// Every node must know every API address (Cluster.Status reports them).
	WaitFor(t, "every node to know every API address", func() bool {
		for _, n := range c.Nodes {
			if len(n.NodeAddrs()) < size || n.AppliedIndex() < l.AppliedIndex() {
				return false
			}
		}
		return true
	})
	return c
}

func (c *Cluster) start(bootstrap bool) *Node {
	c.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatalf("listen: %v", err)
	}
	reg := prometheus.NewRegistry()
	var certs *node.TLS
	if c.tlsDir != "" {
		name := filepath.Join(c.tlsDir, fmt.Sprintf("n%d", len(c.Nodes)))
		if certs, err = node.NewTLS(node.TLSFiles{CertFile: name + ".pem", KeyFile: name + "-key.pem", CAFile: c.CAFile}); err != nil {
			c.t.Fatalf("load TLS: %v", err)
		}
		ln = tls.NewListener(ln, certs.ServerConfig(tls.VerifyClientCertIfGiven))
	}
	n, err := node.Open(node.Config{
		DataDir: c.t.TempDir(), RaftAddr: "127.0.0.1:0", APIAddr: ln.Addr().String(), ClusterSecret: "test-cluster-secret",
		Bootstrap: bootstrap, Timing: node.FastTiming, LeaderWait: 5 * time.Second, ReadWait: 5 * time.Second, Registerer: reg,
		TLS: certs,
		// Expiry acts only in namespaces with retention policies: fast
		// enough for tests that set one to see it.
		RetentionInterval: 100 * time.Millisecond,
	})
	if err != nil {
		ln.Close()
		c.t.Fatalf("open node: %v", err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: rpc.NewHandler(n, rpc.Options{Registerer: reg, Gatherer: reg}), Protocols: p, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	tn := &Node{Node: n, Addr: ln.Addr().String(), srv: srv}
	// Registered after TempDir's own cleanup, so it runs before the
	// directory is removed.
	c.t.Cleanup(func() { c.Kill(tn) })
	return tn
}

// Endpoints are the API addresses of every node, killed ones included.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr)
	}
	return out
}

func (c *Cluster) leaderOrNil() *Node {
	for _, n := range c.Nodes {
		if n.Node != nil && n.IsLeader() {
			return n
		}
	}
	return nil
}

// Leader waits until the running nodes agree on a leader and returns it.
func (c *Cluster) Leader() *Node {
	c.t.Helper()
	var l *Node
	WaitFor(c.t, "one agreed leader", func() bool {
		if l = c.leaderOrNil(); l == nil {
			return false
		}
		for _, n := range c.Nodes {
			if n.Node != nil {
				if id, _ := n.Leader(); id != l.ID() {
					return false
				}
			}
		}
		return true
	})
	return l
}

// Kill stops n at once, as a crash would: its connections are cut and its
// Raft stops without handing leadership over.
func (c *Cluster) Kill(n *Node) {
	if n.Node == nil {
		return
	}
	n.srv.Close()
	if err := n.Halt(); err != nil {
		c.t.Logf("kill %s: %v", n.ID(), err)
	}
	n.Node = nil
}

// WaitFor polls cond every 10 ms until it holds, failing the test after
// Timeout.
func WaitFor(t T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", Timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Main is a T for TestMain, where there is no testing.TB: failures panic,
// Close runs the cleanups and removes the directories.
type Main struct {
	dirs     []string
	cleanups []func()
}

func (m *Main) Helper() {}

func (m *Main) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (m *Main) Logf(format string, args ...any) {}

func (m *Main) TempDir() string {
	dir, err := os.MkdirTemp("", "skald-test-cluster-")
	if err != nil {
		panic(err)
	}
	m.dirs = append(m.dirs, dir)
	return dir
}

func (m *Main) Cleanup(f func()) { m.cleanups = append(m.cleanups, f) }

// Close runs the cleanups, last first, and removes the directories.
func (m *Main) Close() {
	for i := len(m.cleanups) - 1; i >= 0; i-- {
		m.cleanups[i]()
	}
	for _, d := range m.dirs {
		os.RemoveAll(d)
	}
}

// CreateNamespace creates namespace name with the given dedupe window
// (fsmv1.CreateNamespace.dedupe_window_nanos: 0 default, -1 off, -2
// forever) on the leader and returns its token.
func (c *Cluster) CreateNamespace(t T, name string, dedupeWindowNanos int64) string {
	t.Helper()
	token, err := nstoken.New(name)
	if err != nil {
		t.Fatalf("token for %s: %v", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if _, err := c.Leader().CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: name, TokenHash: nstoken.Hash(token), DedupeWindowNanos: dedupeWindowNanos}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return token
}
