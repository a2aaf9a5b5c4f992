package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// The cluster port's ALPN protocols: Raft's RPCs (hashicorp/raft's framing)
// and the peer service (Connect over HTTP/1.1). HTTP/1.1, not HTTP/2: Go's
// HTTP/2 server spends a goroutine and several flushes per call, which a
// loaded leader pays on every forwarded write (bench/README.md, Levers
// weighed); a follower keeps a few connections per leader anyway (node's
// forwarder).
//
// skald-raft/2 carries AppendEntries in Skald's own binary framing
// (codec.go, wire.go); the port offers it only once a binary wire
// serves it, and lists it first, so that a member dialing with both gets
// it from an upgraded node and skald-raft/1 from an older one.
const (
	alpnRaftBinary = "skald-raft/2"
	alpnRaft       = "skald-raft/1"
	alpnPeer       = "http/1.1"
)

// Port is the one listener of node-to-node traffic (the Raft
// address): Raft RPCs and the peer service, both over mutual TLS with the
// cluster's credentials, told apart by ALPN. It is Raft's StreamLayer.
//
// INVARIANT: no byte of a connection reaches Raft or the peer service
// before its TLS handshake has verified the peer's certificate against the
// cluster CA; connections that do not are closed, and counted.
type Port struct {
	Dialer
	ln        net.Listener
	advertise net.Addr
	log       *slog.Logger

	raftConns chan net.Conn
	binConns  chan net.Conn // skald-raft/2, once offerBinary was called
	peerConns chan net.Conn
	binary    atomic.Bool   // skald-raft/2 is offered
	refused   atomic.Uint64 // connections closed before or at the handshake

	slots *handshakeSlots // connections handshaking

	life      context.Context // ends at Close: pending handshakes too
	stop      context.CancelFunc
	closed    <-chan struct{} // life.Done()
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// Open listens on bind and starts accepting. advertise is the
// address others dial (default: the bound one, which must then be
// specific).
func Open(bind, advertise string, creds Creds, dials DialMap, log *slog.Logger) (*Port, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("node: raft listener on %s: %w", bind, err)
	}
	adv := ln.Addr()
	if advertise != "" {
		if adv, err = net.ResolveTCPAddr("tcp", advertise); err != nil {
			ln.Close()
			return nil, fmt.Errorf("node: raft advertise address %q: %w", advertise, err)
		}
	}
	if a, ok := adv.(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("node: raft address %s is not advertisable: set the advertise address", adv)
	}
	p := &Port{
		Dialer: Dialer{creds, dials}, ln: ln, advertise: adv, log: log,
		raftConns: make(chan net.Conn), binConns: make(chan net.Conn), peerConns: make(chan net.Conn),
		slots: newHandshakeSlots(),
	}
	p.life, p.stop = context.WithCancel(context.Background())
	p.closed = p.life.Done()
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

func (p *Port) acceptLoop() {
	defer p.wg.Done()
	cfg := p.creds.serverTLS([]string{alpnRaft, alpnPeer})
	binCfg := p.creds.serverTLS([]string{alpnRaftBinary, alpnRaft, alpnPeer})
	var delay time.Duration
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.closed:
				return
			default:
			}
			// EMFILE and friends: back off instead of spinning.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			p.log.Warn("raft port: accept failed", "err", err, "retry-in", delay)
			select {
			case <-time.After(delay):
			case <-p.closed:
				return
			}
			continue
		}
		delay = 0
		sl, ok := p.slots.admit(remoteIP(conn))
		if !ok {
			p.refused.Add(1)
			conn.Close()
			continue
		}
		c := cfg
		if p.binary.Load() {
			c = binCfg
		}
		p.wg.Add(1)
		go p.handshake(tls.Server(conn, c), sl)
	}
}

// remoteIP is the IP address of c's peer, in net.IP's text form (an
// IPv4-mapped IPv6 address as IPv4), as memberIPs writes them.
func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}

// handshake authenticates conn and hands it to Raft or the peer service.
func (p *Port) handshake(conn *tls.Conn, sl slot) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.life, sl.timeout)
	err := conn.HandshakeContext(ctx)
	cancel()
	p.slots.release(sl)
	if err != nil {
		p.refused.Add(1)
		p.log.Debug("raft port: refused a connection", "remote", conn.RemoteAddr(), "err", err)
		conn.Close()
		return
	}
	to := p.peerConns
	switch proto := conn.ConnectionState().NegotiatedProtocol; proto {
	case alpnRaft:
		to = p.raftConns
	case alpnRaftBinary:
		to = p.binConns
	case alpnPeer:
	default:
		p.refused.Add(1)
		conn.Close()
		return
	}
	select {
	case to <- conn:
	case <-p.closed:
		conn.Close()
	}
}

// Accept implements net.Listener (raft.StreamLayer): the next
// authenticated Raft connection.
func (p *Port) Accept() (net.Conn, error) {
	select {
	case c := <-p.raftConns:
		return c, nil
	case <-p.closed:
		return nil, net.ErrClosed
	}
}

// offerBinary makes the port offer skald-raft/2 to the connections it
// accepts from now on; acceptBinary must then take them.
func (p *Port) offerBinary() { p.binary.Store(true) }

// acceptBinary returns the next authenticated skald-raft/2 connection.
func (p *Port) acceptBinary() (net.Conn, error) {
	select {
	case c := <-p.binConns:
		return c, nil
	case <-p.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections already handed over stay with their
// owners (Raft's transport, the peer server), which close them.
func (p *Port) Close() error {
	var err error
	p.closeOnce.Do(func() {
		p.stop()
		err = p.ln.Close()
		p.wg.Wait()
	})
	return err
}

// RefusedCounter exports refused as a metric.
func (p *Port) RefusedCounter() prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "skald", Subsystem: "cluster_port", Name: "refused_connections_total",
		Help: "Connections to the Raft port closed before or at the TLS handshake: " +
			"no cluster credentials, a timeout, or past the bounds on handshakes.",
	}, func() float64 { return float64(p.refused.Load()) })
}

// Addr is the advertised address.
func (p *Port) Addr() net.Addr { return p.advertise }

// Dial implements raft.StreamLayer: a Raft connection to a member.
func (p *Port) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.dial(ctx, string(addr), alpnRaft)
}

// Dialer dials members' cluster ports with the cluster's credentials.
type Dialer struct {
	creds Creds
	dials DialMap
}

// NewDialer returns a Dialer presenting creds, its dials redirected by
// dials (nil: none).
func NewDialer(creds Creds, dials DialMap) Dialer { return Dialer{creds, dials} }

// dial connects to a member's cluster port for proto and completes the
// handshake; the peer must prove membership too. Every error is a
// *net.OpError with Op "dial": nothing was sent (see classify).
func (d Dialer) dial(ctx context.Context, addr, proto string) (*tls.Conn, error) {
	return d.dialAny(ctx, addr, proto)
}

// dialAny is dial offering several protocols, in order of preference; the
// connection's NegotiatedProtocol says which the peer chose.
func (d Dialer) dialAny(ctx context.Context, addr string, protos ...string) (*tls.Conn, error) {
	var nd net.Dialer
	raw, err := nd.DialContext(ctx, "tcp", d.dials.target(addr))
	if err != nil {
		return nil, err
	}
	conn := tls.Client(raw, d.creds.clientTLS(protos...))
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		// %v, not %w: connect-go replaces any error that is io.EOF (a
		// peer gone mid-handshake) with a bare io.ErrUnexpectedEOF, and
		// the dial error with it.
		return nil, &net.OpError{
			Op: "dial", Net: "tcp", Addr: raw.RemoteAddr(), Err: fmt.Errorf("TLS handshake: %v", err),
		}
	}
	if got := conn.ConnectionState().NegotiatedProtocol; !slices.Contains(protos, got) {
		conn.Close()
		return nil, &net.OpError{
			Op: "dial", Net: "tcp", Addr: raw.RemoteAddr(), Err: fmt.Errorf("peer speaks %q, not %q", got, protos),
		}
	}
	return conn, nil
}

// peerListener is the peer service's side of the port: it yields the
// authenticated connections that asked for HTTP/1.1, until it or the port
// closes.
type peerListener struct {
	p      *Port
	once   sync.Once
	closed chan struct{}
}

func (l *peerListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.p.peerConns:
		return c, nil
	case <-l.p.closed:
	case <-l.closed:
	}
	return nil, net.ErrClosed
}

func (l *peerListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *peerListener) Addr() net.Addr { return l.p.advertise }

// ServePeers serves h to the members' HTTP/1.1 connections until the port
// closes; the returned server's Close ends the connections it holds.
func (p *Port) ServePeers(h http.Handler) *http.Server {
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	srv := &http.Server{
		Handler:           h,
		Protocols:         protos,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	go func() {
		err := srv.Serve(&peerListener{p: p, closed: make(chan struct{})})
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			p.log.Warn("peer service stopped", "err", err)
		}
	}()
	return srv
}

// peerDialTimeout bounds connecting to a member's peer service, the
// handshake included.
const peerDialTimeout = 5 * time.Second

// PeerTransport is the HTTP transport of the peer clients: HTTP/1.1 over
// mutual TLS to the members' cluster ports.
func (d Dialer) PeerTransport() *http.Transport {
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	return &http.Transport{
		DialTLSContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, peerDialTimeout)
			defer cancel()
			return d.dial(ctx, addr, alpnPeer)
		},
		Protocols:           protos,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
	}
}
