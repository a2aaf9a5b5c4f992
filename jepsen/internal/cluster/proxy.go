package cluster

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
)

// Proxy runs every node on 127.0.0.1 and puts a userspace TCP proxy on
// every directed link (node a's Raft and node-to-node connections to node
// b); each node is told to dial its links through them (`skald server
// --dial-map`). A cut link accepts connections and swallows them — dials
// succeed, nothing arrives, calls time out — like a black hole. It needs
// no privileges; gossip is not proxied (membership still sees the
// partitioned node alive), and proxies copy every peer byte through the
// harness process.
type Proxy struct {
	base  int
	n     int
	links map[[2]int][]*link // (from, to) → API and Raft links
}

// NewProxy places node i's services at base+10i+s and starts the links.
func NewProxy(n, base int) (*Proxy, error) {
	p := &Proxy{base: base, n: n, links: map[[2]int][]*link{}}
	for a := range n {
		for b := range n {
			if a == b {
				continue
			}
			for _, s := range []int{0, 1} {
				l, err := newLink(fmt.Sprintf("127.0.0.1:%d", p.Port(b, s)))
				if err != nil {
					p.Close()
					return nil, err
				}
				p.links[[2]int{a, b}] = append(p.links[[2]int{a, b}], l)
			}
		}
	}
	return p, nil
}

func (p *Proxy) Name() string      { return "proxy" }
func (p *Proxy) Host(int) string   { return "127.0.0.1" }
func (p *Proxy) Port(i, s int) int { return p.base + 10*i + s }

// Command adds node i's dial map: each peer's API and Raft address goes
// through the link from i to that peer.
func (p *Proxy) Command(i int, argv []string) []string {
	var pairs []string
	for b := range p.n {
		for _, l := range p.links[[2]int{i, b}] {
			pairs = append(pairs, l.target+"="+l.addr())
		}
	}
	return append(argv, "--dial-map", strings.Join(pairs, ","))
}

func (p *Proxy) Cut(pairs [][2]int) error {
	for _, pr := range pairs {
		for _, k := range [][2]int{pr, {pr[1], pr[0]}} {
			for _, l := range p.links[k] {
				l.setCut(true)
			}
		}
	}
	return nil
}

func (p *Proxy) Heal() error {
	for _, ls := range p.links {
		for _, l := range ls {
			l.setCut(false)
		}
	}
	return nil
}

func (p *Proxy) Close() error {
	for _, ls := range p.links {
		for _, l := range ls {
			l.close()
		}
	}
	return nil
}

// link forwards connections from its listener to target unless cut.
type link struct {
	target string
	ln     net.Listener
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
	closed bool
}

func newLink(target string) (*link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{target: target, ln: ln, conns: map[net.Conn]bool{}}
	go l.serve()
	return l, nil
}

func (l *link) addr() string { return l.ln.Addr().String() }

func (l *link) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		if !l.track(c) {
			c.Close()
			return
		}
		if l.isCut() {
			continue // held open, never forwarded: a black hole
		}
		go l.forward(c)
	}
}

func (l *link) forward(c net.Conn) {
	up, err := net.Dial("tcp", l.target)
	if err != nil {
		l.drop(c)
		return
	}
	if !l.track(up) {
		up.Close()
		c.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	l.drop(c)
	l.drop(up)
}

func (l *link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = true
	return true
}

func (l *link) drop(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	c.Close()
}

func (l *link) isCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut
}

// setCut cuts or heals the link; either way the open connections are
// closed (a cut must not leave a working one; a heal must not leave a
// swallowed one).
func (l *link) setCut(cut bool) {
	l.mu.Lock()
	if l.cut == cut {
		l.mu.Unlock()
		return
	}
	l.cut = cut
	conns := l.conns
	l.conns = map[net.Conn]bool{}
	l.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

func (l *link) close() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[net.Conn]bool{}
	l.mu.Unlock()
	l.ln.Close()
	for c := range conns {
		c.Close()
	}
}
