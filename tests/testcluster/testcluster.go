// Package testcluster runs a real Skald cluster inside a test process for
// the client's and the console's tests: node's TestCluster (N nodes on
// 127.0.0.1 with real Raft over TCP, Pebble on disk) with the full API
// handler (rpc.NewHandler) on every node's HTTP server, the admin
// namespace, and optionally TLS.
// A test kills nodes and transfers leadership; every wait has a deadline.
//
// It imports the top of the tree (node, rpc), so it lives beside the
// tests that use it, not under internal/, the ground floor that imports
// nothing of ours above it (rpc's TestImportsRunDownward).
package testcluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node"
	"github.com/skalddb/skald/node/transport"
	"github.com/skalddb/skald/rpc"
)

// AdminToken is the admin token of every test cluster.
const AdminToken = "ns_ZGVmYXVsdA_0000000000000000000000000000000000000000000000000000000000000000"

// Timeout bounds every wait of the package.
const Timeout = 20 * time.Second

// Node is one member: its node (nil once killed) and API address (Addr).
type Node = node.TestNode

// T is what the package needs of a test: testing.TB has it, and so has
// Main for a cluster shared by a package's examples.
type T = node.TB

// Cluster is a running test cluster: Nodes, Leader and Followers come
// from node's TestCluster.
type Cluster struct {
	*node.TestCluster
	// CAFile is the CA of a TLS cluster (StartTLS), "" otherwise.
	CAFile string
}

// Start starts size nodes (the first bootstraps, the leader adds the others
// as voters), creates the admin namespace and returns once every node
// has applied it and knows every API address.
func Start(t T, size int) *Cluster {
	t.Helper()
	return start(t, size, "", "", rpc.Options{})
}

// StartWith is Start with the API handlers' options (limits, say); the
// metrics registries are the harness's own.
func StartWith(t T, size int, opts rpc.Options) *Cluster {
	t.Helper()
	return start(t, size, "", "", opts)
}

// StartTLS is Start with TLS on the API port (HTTPS, HTTP/2 by ALPN) and
// mutual TLS between the nodes, certificates from transport.GenerateTLS for
// 127.0.0.1 signed by CAFile.
func StartTLS(t T, size int) *Cluster {
	t.Helper()
	dir := t.TempDir()
	var names []string
	for i := range size {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	if err := transport.GenerateTLS(dir, names, []string{"127.0.0.1"}); err != nil {
		t.Fatalf("generate TLS: %v", err)
	}
	return start(t, size, dir, filepath.Join(dir, "ca.pem"), rpc.Options{})
}

func start(t T, size int, tlsDir, caFile string, opts rpc.Options) *Cluster {
	t.Helper()
	config := func(i int, cfg *node.Config) {
		cfg.LeaderWait, cfg.ReadWait = 5*time.Second, 5*time.Second
		// Expiry acts only in namespaces with retention policies: fast
		// enough for tests that set one to see it.
		cfg.RetentionInterval = 100 * time.Millisecond
		// The handlers' tracer provider traces the nodes too.
		cfg.TracerProvider = opts.TracerProvider
		if tlsDir != "" {
			name := filepath.Join(tlsDir, fmt.Sprintf("n%d", i))
			certs, err := transport.NewTLS(
				transport.TLSFiles{CertFile: name + ".pem", KeyFile: name + "-key.pem", CAFile: caFile})
			if err != nil {
				t.Fatalf("load TLS: %v", err)
			}
			cfg.TLS = certs
		}
	}
	api := func(tn *node.TestNode) http.Handler {
		o := opts
		o.Registerer, o.Gatherer = tn.Registry, tn.Registry
		return rpc.NewHandler(tn.Node, o)
	}
	c := &Cluster{TestCluster: node.StartTestCluster(t, size, node.TestClusterOptions{Config: config, Handler: api}), CAFile: caFile}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if _, err := c.Leader().CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: nstoken.AdminNamespace, TokenHash: nstoken.Hash(AdminToken)}); err != nil {
		t.Fatalf("create the admin namespace: %v", err)
	}
	// Every node must know every API address (Cluster.Status reports
	// them): the harness registered them before this entry.
	c.WaitConverged()
	return c
}

// Endpoints are the API addresses of every node, killed ones included.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr)
	}
	return out
}

// Kill stops n at once, as a crash would: its connections are cut and its
// Raft stops without handing leadership over.
func (c *Cluster) Kill(n *Node) { n.Kill() }

// WaitFor polls cond until it holds, failing the test after Timeout.
func WaitFor(t T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, Timeout, what, cond)
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

func (m *Main) Name() string { return "TestMain" }

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
