package node

import (
	"context"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// DialMap redirects this node's outgoing peer connections — Raft and
// node-to-node calls (forwarded writes, read index) — from an address to
// another: a dial to a key goes to its value. The chaos harness uses it to
// put a proxy on every link between two nodes (jepsen/, -net proxy);
// deployments have no use for it. Gossip is not redirected.
type DialMap map[string]string

func (m DialMap) target(addr string) string {
	if to, ok := m[addr]; ok {
		return to
	}
	return addr
}

func (m DialMap) dialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, m.target(addr))
	}
}

// mappedStreamLayer is Raft's plain TCP stream layer with a DialMap.
type mappedStreamLayer struct {
	net.Listener
	advertise net.Addr
	dials     DialMap
}

func newMappedStreamLayer(bind string, advertise net.Addr, dials DialMap) (*mappedStreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	return &mappedStreamLayer{Listener: ln, advertise: advertise, dials: dials}, nil
}

func (l *mappedStreamLayer) Addr() net.Addr { return l.advertise }

func (l *mappedStreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", l.dials.target(string(addr)), timeout)
}
