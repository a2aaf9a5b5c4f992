package rpc

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// LimitListener returns a listener that holds at most max connections of
// ln open at once (max <= 0: no cap). Past the cap a new connection is
// accepted and closed at once, before a byte is read (the client sees the
// connection reset or closed, and retries elsewhere or later), and counted
// in skald_rpc_connections_refused_total; Accept goes on waiting for the
// next one. Refusing costs one accept and one close per attempt, so a
// flood of connections cannot make Accept spin, and a node at its cap
// keeps its file descriptors for storage. Connections open are the gauge
// skald_rpc_connections_open. reg may be nil.
//
// The cap sits below TLS: a refused connection costs no handshake.
func LimitListener(ln net.Listener, max int, reg prometheus.Registerer) (net.Listener, error) {
	l := &limitListener{Listener: ln, max: int64(max),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "rpc", Name: "connections_refused_total",
			Help: "API connections closed at once because --max-connections were open.",
		}),
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "skald", Subsystem: "rpc", Name: "connections_open",
		Help: "API connections open.",
	}, func() float64 { return float64(l.open.Load()) })
	if reg != nil {
		for _, c := range []prometheus.Collector{l.refused, open} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

type limitListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused prometheus.Counter
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); l.max > 0 && n > l.max {
			l.open.Add(-1)
			l.refused.Inc()
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // reset: no TIME_WAIT kept for a refusal
			}
			c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// Open returns the number of connections open (for tests and logs).
func (l *limitListener) Open() int64 { return l.open.Load() }

// countedConn gives its slot back once, on its first Close.
type countedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
