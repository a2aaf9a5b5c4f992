package node

// This file is for tests only, like hashicorp/raft's testing.go: it lives
// outside _test.go files so that the tests of other packages (rpc,
// tests/testcluster for client/ and console/) can build on it, which
// Go's rule against import cycles would forbid if it were node's test code.
// Nothing here runs unless a test calls it; it does not import "testing".

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skalddb/skald/internal/testutil"
)

// testWait bounds every wait of the test cluster.
const testWait = 20 * time.Second

// testClusterSecret is every test member's cluster secret.
const testClusterSecret = "test-cluster-secret"

// TB is what the test cluster needs of a test: testing.TB has it, and so
// has a stand-in for a cluster that a TestMain shares.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	TempDir() string
	Cleanup(func())
	Name() string
}

// TestClusterOptions shape the members of a test cluster.
type TestClusterOptions struct {
	// Config changes member i's configuration before each Open, on top of
	// the defaults (FastTiming, 10 s LeaderWait and ReadWait, a quiet
	// logger, the member's Registry).
	Config func(i int, cfg *Config)
	// Handler is what a member's HTTP server serves, built after each
	// start with tn.Node and tn.Registry set. nil: the peer service alone.
	Handler func(tn *TestNode) http.Handler
}

// TestCluster is N real nodes on loopback, for tests only (see the top of
// testcluster.go): each with its own data directory, HTTP server (the peer
// service, or Handler's) and Raft transport. Other nodes reach a member's
// Raft transport through its Proxy, so a test can cut the member off
// (partition) and heal it. Every wait has a deadline (20 s) and fails the
// test past it.
type TestCluster struct {
	t     TB
	Nodes []*TestNode
}

// TestNode is one member of a TestCluster.
type TestNode struct {
	*Node // nil while stopped
	// Dir is the data directory, kept across restarts.
	Dir string
	// Addr is the HTTP (API and peer service) address, kept across
	// restarts.
	Addr string
	// Proxy is the Raft address every other member dials.
	Proxy *TestProxy
	// Registry receives the node's metrics (and the Handler's); a fresh
	// one on every start.
	Registry *prometheus.Registry

	t        TB
	index    int
	raftAddr string // where the transport listens
	srv      *http.Server
	opts     *TestClusterOptions
}

// StartTestCluster starts size nodes: the first bootstraps, the leader
// adds the others as voters and registers their API addresses, and the
// call returns once the leader has recorded every member's version
// (unless its Config.VersionInterval turns that off) and every node has
// applied the leader's latest entry, so a test starts on a settled log.
// The test's cleanup kills every member.
func StartTestCluster(t TB, size int, opts TestClusterOptions) *TestCluster {
	t.Helper()
	c := &TestCluster{t: t}
	for i := range size {
		raftAddr := testutil.FreeAddr(t)
		c.Nodes = append(c.Nodes, &TestNode{t: t, index: i, Dir: t.TempDir(), Addr: testutil.FreeAddr(t),
			raftAddr: raftAddr, Proxy: newTestProxy(t, raftAddr), opts: &opts})
	}
	// Registered after TempDir's cleanups, so it runs before the
	// directories are removed.
	t.Cleanup(func() {
		for _, tn := range c.Nodes {
			tn.Kill()
		}
	})
	c.Nodes[0].start(true)
	testutil.Eventually(t, testWait, "the bootstrap node to lead", c.Nodes[0].IsLeader)
	for _, tn := range c.Nodes[1:] {
		tn.start(false)
		// Whoever leads adds it: under load a young leader can step down
		// while the cluster forms.
		testutil.Eventually(t, testWait, "adding a voter", func() bool {
			l := c.leaderOrNil()
			if l == nil {
				return false
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return l.AddVoter(ctx, tn.ID(), tn.Proxy.Addr()) == nil && l.RegisterAPIAddress(ctx, tn.ID(), tn.Addr) == nil
		})
	}
	testutil.Eventually(t, testWait, "the leader to record every member's version", func() bool {
		l := c.leaderOrNil()
		if l == nil {
			return false
		}
		if l.cfg.VersionInterval < 0 {
			return true
		}
		for _, tn := range c.Nodes {
			if _, ok := l.ServerVersion(tn.ID()); !ok {
				return false
			}
		}
		return true
	})
	c.WaitConverged()
	return c
}

func (c *TestCluster) leaderOrNil() *TestNode {
	for _, tn := range c.Nodes {
		if tn.Node != nil && tn.IsLeader() {
			return tn
		}
	}
	return nil
}

// Leader waits until the running members that are not partitioned agree
// on a leader, and returns it.
func (c *TestCluster) Leader() *TestNode {
	c.t.Helper()
	var l *TestNode
	testutil.Eventually(c.t, testWait, "one agreed leader", func() bool {
		if l = c.leaderOrNil(); l == nil {
			return false
		}
		for _, tn := range c.Nodes {
			if tn.Node != nil && !tn.Proxy.Blocked() {
				if id, _ := tn.Leader(); id != l.ID() {
					return false
				}
			}
		}
		return true
	})
	return l
}

// Followers are the running members other than the Leader.
func (c *TestCluster) Followers() []*TestNode {
	c.t.Helper()
	l := c.Leader()
	var out []*TestNode
	for _, tn := range c.Nodes {
		if tn != l && tn.Node != nil {
			out = append(out, tn)
		}
	}
	return out
}

// Others are the running members other than n: where a test holds on
// to a leader it found earlier, the nodes it may stop without stopping
// that one (Followers asks again, and leadership may have moved since).
func (c *TestCluster) Others(n *TestNode) []*TestNode {
	var out []*TestNode
	for _, tn := range c.Nodes {
		if tn != n && tn.Node != nil {
			out = append(out, tn)
		}
	}
	return out
}

// WaitConverged waits until every running member has applied the
// leader's last index.
func (c *TestCluster) WaitConverged() {
	c.t.Helper()
	l := c.Leader()
	target := l.raft.LastIndex()
	for _, tn := range c.Nodes {
		if tn.Node == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		err := tn.waitApplied(ctx, target)
		cancel()
		if err != nil {
			c.t.Fatalf("node %s did not apply index %d: %v", tn.ID(), target, err)
		}
	}
}

func (tn *TestNode) config(bootstrap bool) Config {
	cfg := Config{
		DataDir: tn.Dir, RaftAddr: tn.raftAddr, RaftAdvertise: tn.Proxy.Addr(), APIAddr: tn.Addr,
		ClusterSecret: testClusterSecret, Bootstrap: bootstrap, Timing: FastTiming,
		LeaderWait: 10 * time.Second, ReadWait: 10 * time.Second, Logger: testutil.Logger(tn.t),
		Registerer: tn.Registry,
	}
	if tn.opts.Config != nil {
		tn.opts.Config(tn.index, &cfg)
	}
	return cfg
}

// start opens the node and serves its API. On a first start (no data
// yet) a port another process took since FreeAddr picked it is replaced
// by a fresh one: test binaries run in parallel and share the ports.
func (tn *TestNode) start(bootstrap bool) {
	tn.t.Helper()
	first := tn.Node == nil && tn.srv == nil
	var ln net.Listener
	for attempt := 0; ; attempt++ {
		var err error
		if ln, err = net.Listen("tcp", tn.Addr); err == nil {
			break
		}
		if first && attempt < 20 {
			tn.Addr = testutil.FreeAddr(tn.t)
			continue
		}
		if attempt < 50 { // a restart reuses its port: wait for it
			time.Sleep(100 * time.Millisecond)
			continue
		}
		tn.t.Fatalf("listen api: %v", err)
	}
	tn.Registry = prometheus.NewRegistry()
	var n *Node
	for attempt := 0; ; attempt++ {
		var err error
		if n, err = Open(tn.config(bootstrap)); err == nil {
			break
		}
		if strings.Contains(err.Error(), "address already in use") && attempt < 20 {
			if first {
				tn.raftAddr = testutil.FreeAddr(tn.t)
				tn.Proxy.setTarget(tn.raftAddr)
			} else {
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		ln.Close()
		tn.t.Fatalf("open node: %v", err)
	}
	tn.Node = n
	var h http.Handler
	if tn.opts.Handler != nil {
		h = tn.opts.Handler(tn)
	} else {
		h = http.NotFoundHandler()
	}
	// As skald server: HTTP/1 and h2c, HTTP/2 by ALPN with TLS.
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	if n.cfg.TLS != nil {
		p.SetHTTP2(true)
		ln = tls.NewListener(ln, n.cfg.TLS.ServerConfig(tls.VerifyClientCertIfGiven))
	}
	tn.srv = &http.Server{Handler: h, Protocols: p, ReadHeaderTimeout: 5 * time.Second}
	go tn.srv.Serve(ln)
}

// Restart starts a stopped member again on its data directory and
// addresses.
func (tn *TestNode) Restart() {
	tn.t.Helper()
	tn.start(false)
}

// Stop shuts the member down gracefully: a leader hands leadership away
// first.
func (tn *TestNode) Stop() { tn.stop(true) }

// Kill stops the member at once, as a crash would: its connections are
// cut and its Raft stops without handing leadership over.
func (tn *TestNode) Kill() { tn.stop(false) }

func (tn *TestNode) stop(graceful bool) {
	if tn.Node == nil {
		return
	}
	if tn.srv != nil {
		tn.srv.Close()
	}
	if err := tn.Node.shutdown(graceful); err != nil {
		tn.t.Logf("stop node %s: %v", tn.ID(), err)
	}
	tn.Node = nil
}

// TestProxy forwards TCP connections to a member's Raft transport until
// blocked, or holds every byte while stalled.
type TestProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond // signalled when block, stall or closed change
	block  bool
	stall  bool
	conns  map[net.Conn]struct{}
	closed bool
}

func newTestProxy(t TB, target string) *TestProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen proxy: %v", err)
	}
	p := &TestProxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.cond = sync.NewCond(&p.mu)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Addr is where the proxy listens: the member's advertised Raft address.
func (p *TestProxy) Addr() string { return p.ln.Addr().String() }

func (p *TestProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.block || p.closed {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go p.pipe(c)
	}
}

func (p *TestProxy) setTarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

func (p *TestProxy) pipe(c net.Conn) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	u, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		p.drop(c)
		return
	}
	p.mu.Lock()
	if p.block || p.closed {
		p.mu.Unlock()
		u.Close()
		p.drop(c)
		return
	}
	p.conns[u] = struct{}{}
	p.mu.Unlock()
	go func() { io.Copy(stallWriter{p, u}, c); p.drop(u); p.drop(c) }()
	io.Copy(stallWriter{p, c}, u)
	p.drop(u)
	p.drop(c)
}

func (p *TestProxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// SetBlocked cuts (true) every connection through the proxy and refuses
// new ones, or lets them through again (false): the member is partitioned
// from the Raft traffic of the others, or healed.
func (p *TestProxy) SetBlocked(b bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.block = b
	p.cond.Broadcast()
	if b {
		for c := range p.conns {
			c.Close()
			delete(p.conns, c)
		}
	}
}

// SetStalled holds (true) every byte through the proxy, both ways, on the
// connections open and on those it accepts meanwhile, as a paused process
// (SIGSTOP) would: callers wait for their deadlines. false lets them flow
// again.
func (p *TestProxy) SetStalled(s bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stall = s
	p.cond.Broadcast()
}

// stallWriter writes to w once the proxy is not stalled.
type stallWriter struct {
	p *TestProxy
	w io.Writer
}

func (s stallWriter) Write(b []byte) (int, error) {
	s.p.mu.Lock()
	for s.p.stall && !s.p.block && !s.p.closed {
		s.p.cond.Wait()
	}
	s.p.mu.Unlock()
	return s.w.Write(b)
}

// Blocked reports whether the proxy is cut.
func (p *TestProxy) Blocked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.block
}

func (p *TestProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
}
