package node

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// The in-process cluster: N real nodes on loopback, each with its own data
// directory, HTTP server (peer service) and Raft transport. Other nodes
// reach a node's Raft transport through a TCP proxy, so a test can cut a
// node off (partition) and heal it. Every wait has a deadline.

const waitTimeout = 20 * time.Second

// proxy forwards TCP connections to target until blocked.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	block  bool
	conns  map[net.Conn]struct{}
	closed bool
}

func newProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
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

func (p *proxy) setTarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

func (p *proxy) pipe(c net.Conn) {
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
	go func() { io.Copy(u, c); p.drop(u); p.drop(c) }()
	io.Copy(c, u)
	p.drop(u)
	p.drop(c)
}

func (p *proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// setBlocked cuts (or restores) every connection through the proxy.
func (p *proxy) setBlocked(b bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.block = b
	if b {
		for c := range p.conns {
			c.Close()
			delete(p.conns, c)
		}
	}
}

func (p *proxy) blocked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.block
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
}

// tnode is one member of a test cluster.
type tnode struct {
	t        testing.TB
	*Node           // nil while stopped
	dir      string // data directory
	raftAddr string // where the transport listens
	proxy    *proxy // the Raft address other nodes dial
	apiAddr  string // HTTP (peer service)
	srv      *http.Server
	mod      func(*Config)
}

func (tn *tnode) config(bootstrap bool) Config {
	cfg := Config{
		DataDir: tn.dir, RaftAddr: tn.raftAddr, RaftAdvertise: tn.proxy.addr(), APIAddr: tn.apiAddr,
		ClusterSecret: "test-cluster-secret", Bootstrap: bootstrap, Timing: FastTiming,
		LeaderWait: 10 * time.Second, ReadWait: 10 * time.Second, Logger: testutil.Logger(tn.t),
	}
	if tn.mod != nil {
		tn.mod(&cfg)
	}
	return cfg
}

// start opens the node and serves its API. On a first start (no data
// yet) a port another process took since freePort picked it is replaced
// by a fresh one: test binaries run in parallel and share the ports.
func (tn *tnode) start(bootstrap bool) {
	tn.t.Helper()
	first := tn.Node == nil && tn.srv == nil
	var ln net.Listener
	for attempt := 0; ; attempt++ {
		var err error
		if ln, err = net.Listen("tcp", tn.apiAddr); err == nil {
			break
		}
		if first && attempt < 20 {
			tn.apiAddr = testutil.FreeAddr(tn.t)
			continue
		}
		if attempt < 50 { // a restart reuses its port: wait for it
			time.Sleep(100 * time.Millisecond)
			continue
		}
		tn.t.Fatalf("listen api: %v", err)
	}
	var n *Node
	for attempt := 0; ; attempt++ {
		var err error
		if n, err = Open(tn.config(bootstrap)); err == nil {
			break
		}
		if strings.Contains(err.Error(), "address already in use") && attempt < 20 {
			if first {
				tn.raftAddr = testutil.FreeAddr(tn.t)
				tn.proxy.setTarget(tn.raftAddr)
			} else {
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		ln.Close()
		tn.t.Fatalf("open node: %v", err)
	}
	tn.Node = n
	mux := http.NewServeMux()
	mux.Handle(n.PeerHandler())
	tn.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if n.cfg.TLS != nil {
		ln = tls.NewListener(ln, n.cfg.TLS.ServerConfig(tls.VerifyClientCertIfGiven))
	}
	go tn.srv.Serve(ln)
}

// stop shuts the node down; graceful hands leadership away first, a kill
// does not.
func (tn *tnode) stop(graceful bool) {
	if tn.Node == nil {
		return
	}
	if tn.srv != nil {
		tn.srv.Close()
	}
	if err := tn.Node.shutdown(graceful); err != nil {
		tn.t.Logf("stop node: %v", err)
	}
	tn.Node = nil
}

type cluster struct {
	t     testing.TB
	nodes []*tnode
}

// newCluster starts size nodes: the first bootstraps, the leader adds the
// others as voters, and the call returns once every node has applied the
// leader's latest entry.
func newCluster(t testing.TB, size int, mod func(*Config)) *cluster {
	t.Helper()
	c := &cluster{t: t}
	for i := 0; i < size; i++ {
		raftAddr := testutil.FreeAddr(t)
		tn := &tnode{t: t, dir: t.TempDir(), raftAddr: raftAddr, proxy: newProxy(t, raftAddr), apiAddr: testutil.FreeAddr(t), mod: mod}
		c.nodes = append(c.nodes, tn)
	}
	t.Cleanup(func() {
		for _, tn := range c.nodes {
			tn.stop(false)
		}
	})
	c.nodes[0].start(true)
	testutil.Eventually(t, waitTimeout, "the bootstrap node to lead", c.nodes[0].IsLeader)
	for _, tn := range c.nodes[1:] {
		tn.start(false)
		// Whoever leads adds it: under load a young leader can step down
		// while the cluster forms.
		testutil.Eventually(t, waitTimeout, "adding a voter", func() bool {
			for _, l := range c.nodes {
				if l.Node != nil && l.IsLeader() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err := l.AddVoter(ctx, tn.ID(), tn.proxy.addr())
					cancel()
					return err == nil
				}
			}
			return false
		})
	}
	c.waitConverged()
	return c
}

// leader returns the node every running node agrees leads.
func (c *cluster) leader() *tnode {
	c.t.Helper()
	var l *tnode
	testutil.Eventually(c.t, waitTimeout, "one agreed leader", func() bool {
		l = nil
		for _, tn := range c.nodes {
			if tn.Node != nil && tn.IsLeader() {
				l = tn
			}
		}
		if l == nil {
			return false
		}
		for _, tn := range c.nodes {
			if tn.Node != nil && !tn.proxy.blocked() {
				if id, _ := tn.Leader(); id != l.ID() {
					return false
				}
			}
		}
		return true
	})
	return l
}

func (c *cluster) followers() []*tnode {
	l := c.leader()
	var out []*tnode
	for _, tn := range c.nodes {
		if tn != l && tn.Node != nil {
			out = append(out, tn)
		}
	}
	return out
}

// waitConverged waits until every running node has applied the leader's
// last index.
func (c *cluster) waitConverged() {
	c.t.Helper()
	l := c.leader()
	target := l.raft.LastIndex()
	for _, tn := range c.nodes {
		if tn.Node == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		err := tn.waitApplied(ctx, target)
		cancel()
		if err != nil {
			c.t.Fatalf("node %s did not apply index %d: %v", tn.ID(), target, err)
		}
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func createNamespace(t testing.TB, n *Node, name string) {
	t.Helper()
	if _, err := n.CreateNamespace(ctxT(t), &fsmv1.CreateNamespace{Name: name}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func appendOne(ctx context.Context, n *Node, ns, stream, id string) (*fsm.AppendResult, error) {
	return n.Append(ctx, &fsmv1.Append{Namespace: ns, Stream: stream, Messages: []*fsmv1.NewMessage{{Id: id, Type: "T", Data: []byte(`{"k":1}`)}}})
}

// readAll reads every message of ns on n at the given consistency.
func readAll(t testing.TB, n *Node, ns string, opts nodeapi.ReadOptions) []fsm.Message {
	t.Helper()
	var msgs []fsm.Message
	_, err := n.Read(ctxT(t), ns, opts, func(v *fsm.View) (err error) {
		msgs, err = v.ReadAll(1, -1)
		return err
	})
	if err != nil {
		t.Fatalf("read all on %s: %v", n.ID(), err)
	}
	return msgs
}

func isUnknownOrUnavailable(err error) bool {
	return errors.Is(err, nodeapi.ErrUnknownOutcome) || errors.Is(err, nodeapi.ErrNoLeader) || errors.Is(err, nodeapi.ErrShutdown)
}
