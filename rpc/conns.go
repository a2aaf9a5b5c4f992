package rpc

import (
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
// cap). Past either cap a new connection is accepted and closed at once,
// before a byte is read (the client sees the connection reset or closed,
// and retries elsewhere or later), and counted:
// skald_rpc_connections_refused_total past max,
// skald_rpc_connections_refused_per_ip_total past perIP. Accept goes on
// waiting for the next one. Refusing costs one accept and one close per
// attempt, so a flood of connections cannot make Accept spin, a node at
// its cap keeps its file descriptors for storage, and one address holding
// all it may (a slowloris reconnecting as fast as it is closed) leaves
// the rest of the cap to the others. Connections open are the gauge
// skald_rpc_connections_open. reg may be nil.
//
// The caps sit below TLS: a refused connection costs no handshake.
func LimitListener(ln net.Listener, max, perIP int, reg prometheus.Registerer) (net.Listener, error) {
	l := &limitListener{Listener: ln, max: int64(max), perIP: perIP, byIP: make(map[string]int),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "rpc", Name: "connections_refused_total",
			Help: "API connections closed at once because --max-connections were open.",
		}),
		refusedPerIP: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "rpc", Name: "connections_refused_per_ip_total",
			Help: "API connections closed at once because their remote address had --max-connections-per-ip open.",
		}),
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "skald", Subsystem: "rpc", Name: "connections_open",
		Help: "API connections open.",
	}, func() float64 { return float64(l.open.Load()) })
	if reg != nil {
		for _, c := range []prometheus.Collector{l.refused, l.refusedPerIP, open} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

// limitListener is LimitListener's listener.
//
// INVARIANT: open counts the connections it returned and that are not
// closed yet, byIP the same by remote IP (addresses with none are not
// kept); open <= max and byIP[ip] <= perIP where those caps are set.
type limitListener struct {
	net.Listener
	max          int64
	perIP        int
	open         atomic.Int64
	mu           sync.Mutex
	byIP         map[string]int
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
		return &countedConn{Conn: c, l: l, ip: ip}, nil
	}
}

// take counts a connection from ip, or returns the counter of the cap it
// would pass.
func (l *limitListener) take(ip string) prometheus.Counter {
	if n := l.open.Add(1); l.max > 0 && n > l.max {
		l.open.Add(-1)
		return l.refused
	}
	if l.perIP <= 0 || ip == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byIP[ip] >= l.perIP {
		l.open.Add(-1)
		return l.refusedPerIP
	}
	l.byIP[ip]++
	return nil
}

// give returns the slots of a connection from ip that take counted.
func (l *limitListener) give(ip string) {
	l.open.Add(-1)
	if l.perIP <= 0 || ip == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
}

// Open returns the number of connections open (for tests and logs).
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
