package rpc

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxConnectionsPerIP is what one remote IP address may hold of
// maxConns API connections when the operator does not say: 256, or half
// of maxConns when that is less, and never less than 64 (nor more than
// maxConns; with no cap on all, 256). 256 is far more than a client needs (HTTP/2 multiplexes a
// client's calls over one connection; a benchmark with 64 callers over
// HTTP/1.1 holds 64), and it leaves a cap of 16,384 to 64 addresses at
// least; half of a small cap keeps one address from taking all of it,
// and 64 keeps such a benchmark working on loopback under the smallest.
// Clients behind one NAT or a proxy that does not keep their addresses
// share one address, and need more: the flag says so.
func DefaultMaxConnectionsPerIP(maxConns int) int {
	if maxConns <= 0 { // no cap on all
		return 256
	}
	return min(max(min(256, maxConns/2), 64), maxConns)
}

// LimitListener returns a listener that holds at most max connections of
// ln open at once, and at most perIP from one remote IP address (<= 0: no
// cap): NewConnCaps(max, perIP).Listener(ln, "rpc", "API", reg), the API
// port's listener and metrics (skald_rpc_connections_*).
func LimitListener(ln net.Listener, max, perIP int, reg prometheus.Registerer) (net.Listener, error) {
	return NewConnCaps(max, perIP).Listener(ln, "rpc", "API", reg)
}

// ConnCaps are connection caps shared by every listener it limits: at
// most max connections open at once over all of them, and at most perIP
// from one remote IP address (<= 0: no cap). The client listeners of one
// process share one ConnCaps, because their connections take the same
// file descriptors and one address may not hold more by spreading over
// ports.
//
// Past either cap a new connection is accepted and closed at once,
// before a byte is read (the client sees the connection reset or closed,
// and retries elsewhere or later), and counted by the listener that
// accepted it. Accept goes on waiting for the next one. Refusing costs
// one accept and one close per attempt, so a flood of connections cannot
// make Accept spin, a node at its cap keeps its file descriptors for
// storage, and one address holding all it may (a slowloris reconnecting
// as fast as it is closed) leaves the rest of the cap to the others.
//
// The caps sit below TLS: a refused connection costs no handshake.
//
// INVARIANT: open counts the connections its listeners returned and that
// are not closed yet, byIP the same by remote IP (addresses with none are
// not kept); open <= max and byIP[ip] <= perIP where those caps are set.
type ConnCaps struct {
	max   int64
	perIP int
	open  atomic.Int64
	mu    sync.Mutex
	byIP  map[string]int
}

// NewConnCaps returns caps of max connections in all and perIP from one
// remote IP address (<= 0: no cap).
func NewConnCaps(max, perIP int) *ConnCaps {
	return &ConnCaps{max: int64(max), perIP: perIP, byIP: make(map[string]int)}
}

// Listener returns ln under c's caps. Its refusals are counted in
// skald_<subsystem>_connections_refused_total (past max) and
// skald_<subsystem>_connections_refused_per_ip_total (past perIP), and
// its connections open in the gauge skald_<subsystem>_connections_open;
// what names its connections in the metrics' help ("API"). reg may be
// nil.
func (c *ConnCaps) Listener(ln net.Listener, subsystem, what string, reg prometheus.Registerer) (net.Listener, error) {
	l := &limitListener{Listener: ln, caps: c,
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: subsystem, Name: "connections_refused_total",
			Help: what + " connections closed at once because --max-connections were open (every client listener's together).",
		}),
		refusedPerIP: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: subsystem, Name: "connections_refused_per_ip_total",
			Help: what + " connections closed at once because their remote address had --max-connections-per-ip open (every client listener's together).",
		}),
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "skald", Subsystem: subsystem, Name: "connections_open",
		Help: what + " connections open.",
	}, func() float64 { return float64(l.open.Load()) })
	if reg != nil {
		for _, m := range []prometheus.Collector{l.refused, l.refusedPerIP, open} {
			if err := reg.Register(m); err != nil {
				return nil, fmt.Errorf("register the %s connection metrics: %w", what, err)
			}
		}
	}
	return l, nil
}

// limitListener is a listener under ConnCaps.
//
// INVARIANT: open counts the connections it returned and that are not
// closed yet (each is counted in caps too).
type limitListener struct {
	net.Listener
	caps         *ConnCaps
	open         atomic.Int64
	refused      prometheus.Counter
	refusedPerIP prometheus.Counter
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		if past := l.take(ip); past != nil {
			past.Inc()
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // reset: no TIME_WAIT kept for a refusal
			}
			c.Close()
			continue
		}
		l.open.Add(1)
		return &countedConn{Conn: c, l: l, ip: ip}, nil
	}
}

// take counts a connection from ip in the caps, or returns the counter
// of the cap it would pass.
func (l *limitListener) take(ip string) prometheus.Counter {
	c := l.caps
	if n := c.open.Add(1); c.max > 0 && n > c.max {
		c.open.Add(-1)
		return l.refused
	}
	if c.perIP <= 0 || ip == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byIP[ip] >= c.perIP {
		c.open.Add(-1)
		return l.refusedPerIP
	}
	c.byIP[ip]++
	return nil
}

// give returns the slots of a connection from ip that take counted.
func (l *limitListener) give(ip string) {
	l.open.Add(-1)
	c := l.caps
	c.open.Add(-1)
	if c.perIP <= 0 || ip == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byIP[ip]--; c.byIP[ip] <= 0 {
		delete(c.byIP, ip)
	}
}

// Open returns the number of this listener's connections open (for tests
// and logs).
func (l *limitListener) Open() int64 { return l.open.Load() }

// remoteIP is the IP address of c's peer ("" when it has none, as on a
// Unix socket); an IPv4-mapped IPv6 address counts as its IPv4 address.
func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

// countedConn gives its slots back once, on its first Close.
type countedConn struct {
	net.Conn
	l    *limitListener
	ip   string
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.give(c.ip) })
	return err
}
