package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// binaryWire carries AppendEntries, heartbeats included, over connections
// that negotiated skald-raft/2 on the cluster port: the framing of
// codec.go, one write per request and one per answer, no reflection.
// Every other RPC (votes, snapshots, TimeoutNow) stays on hashicorp/raft's
// NetworkTransport and its msgpack (skald-raft/1).
//
// Rolling upgrades: a node dials offering skald-raft/2 and skald-raft/1 in
// one handshake, and the server picks the first of its own list it knows.
// A peer that answers skald-raft/1 has not been upgraded: the connection
// is closed unused (its transport sees a clean EOF), the peer is marked
// legacy for legacyRecheck, and AppendEntries to it goes through
// NetworkTransport until then. A node still serves skald-raft/1, so
// older nodes reach it unchanged. Both protocols ride the same mutual TLS
// and certificate checks (port.go).
type binaryWire struct {
	port    *Port
	addrs   raft.ServerAddressProvider
	timeout time.Duration
	log     *slog.Logger
	consume chan raft.RPC // the transport's Consumer
	done    chan struct{} // closed by close
	now     func() time.Time

	served atomic.Uint64 // requests answered over skald-raft/2

	mu      sync.Mutex
	closed  bool
	idle    map[raft.ServerAddress][]*frameConn
	legacy  map[raft.ServerAddress]time.Time // peers answering skald-raft/1, until when
	inbound map[net.Conn]struct{}
	wg      sync.WaitGroup
}

const (
	// maxIdleFrameConns is how many idle connections to one peer are kept
	// (replication and heartbeats each hold one while in flight).
	maxIdleFrameConns = 3
	// legacyRecheck is how long a peer that answered skald-raft/1 is
	// spoken to in msgpack before skald-raft/2 is offered to it again.
	legacyRecheck = 30 * time.Second
	// frameReadBuffer is the buffer in front of an inbound connection.
	frameReadBuffer = 64 << 10
)

func newBinaryWire(port *Port, addrs raft.ServerAddressProvider, timeout time.Duration, log *slog.Logger) *binaryWire {
	return &binaryWire{
		port: port, addrs: addrs, timeout: timeout, log: log,
		consume: make(chan raft.RPC), done: make(chan struct{}), now: time.Now,
		idle: make(map[raft.ServerAddress][]*frameConn), legacy: make(map[raft.ServerAddress]time.Time),
		inbound: make(map[net.Conn]struct{}),
	}
}

// start accepts skald-raft/2 connections from the port, and forwards
// legacy's RPCs into the consumer channel, until close.
func (w *binaryWire) start(legacy <-chan raft.RPC) {
	w.port.offerBinary()
	w.wg.Add(2)
	go w.acceptLoop()
	go func() {
		defer w.wg.Done()
		for {
			select {
			case rpc := <-legacy:
				select {
				case w.consume <- rpc:
				case <-w.done:
					return
				}
			case <-w.done:
				return
			}
		}
	}()
}

// frameConn is one outbound skald-raft/2 connection with its reused
// request buffer.
type frameConn struct {
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
	hdr  [frameHeaderBytes]byte
}

// appendEntries sends req to the server id at target over skald-raft/2.
// ok is false when the peer speaks only skald-raft/1: nothing was sent and
// the caller uses hashicorp/raft's transport instead.
func (w *binaryWire) appendEntries(
	id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse,
) (ok bool, err error) {
	if a, err := w.addrs.ServerAddr(id); err == nil {
		target = a
	}
	c, ok, err := w.get(target)
	if !ok || err != nil {
		return ok, err
	}
	if err := w.roundTrip(c, req, resp); err != nil {
		c.conn.Close()
		return true, err
	}
	w.put(target, c)
	return true, nil
}

func (w *binaryWire) roundTrip(c *frameConn, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if w.timeout > 0 {
		c.conn.SetDeadline(w.now().Add(w.timeout))
	}
	var err error
	if c.buf, err = appendAppendEntriesRequest(c.buf[:0], req); err != nil {
		return err
	}
	if len(c.buf) > 1<<20 {
		defer func() { c.buf = nil }() // keep no huge buffer around
	}
	if _, err := c.conn.Write(c.buf); err != nil {
		return err
	}
	body, err := readFrame(c.r, &c.hdr)
	if err != nil {
		return err
	}
	remote, err := decodeAppendEntriesResponse(body, resp)
	if err != nil {
		return err
	}
	return remote
}

// get returns an idle connection to target or dials one; ok is false when
// target is a legacy peer.
func (w *binaryWire) get(target raft.ServerAddress) (*frameConn, bool, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, true, raft.ErrTransportShutdown
	}
	if until, ok := w.legacy[target]; ok && w.now().Before(until) {
		w.mu.Unlock()
		return nil, false, nil
	}
	if conns := w.idle[target]; len(conns) > 0 {
		c := conns[len(conns)-1]
		w.idle[target] = conns[:len(conns)-1]
		w.mu.Unlock()
		return c, true, nil
	}
	w.mu.Unlock()

	timeout := w.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := w.port.dialAny(ctx, string(target), alpnRaftBinary, alpnRaft)
	if err != nil {
		return nil, true, err
	}
	if proto := conn.ConnectionState().NegotiatedProtocol; proto != alpnRaftBinary {
		conn.Close()
		w.mu.Lock()
		_, known := w.legacy[target]
		w.legacy[target] = w.now().Add(legacyRecheck)
		w.mu.Unlock()
		if !known {
			w.log.Info("raft peer speaks only the older framing: sending it msgpack until it is upgraded",
				"peer", target, "protocol", proto, "recheck-in", legacyRecheck)
		}
		return nil, false, nil
	}
	w.mu.Lock()
	_, was := w.legacy[target]
	delete(w.legacy, target)
	w.mu.Unlock()
	if was {
		w.log.Info("raft peer now speaks skald-raft/2: AppendEntries in the binary framing", "peer", target)
	}
	return &frameConn{conn: conn, r: bufio.NewReaderSize(conn, 4<<10)}, true, nil
}

func (w *binaryWire) put(target raft.ServerAddress, c *frameConn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.idle[target]) >= maxIdleFrameConns {
		c.conn.Close()
		return
	}
	w.idle[target] = append(w.idle[target], c)
}

// isLegacy reports whether target is spoken to in msgpack now.
func (w *binaryWire) isLegacy(target raft.ServerAddress) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	until, ok := w.legacy[target]
	return ok && w.now().Before(until)
}

func (w *binaryWire) acceptLoop() {
	defer w.wg.Done()
	for {
		conn, err := w.port.acceptBinary()
		if err != nil {
			return
		}
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			conn.Close()
			return
		}
		w.inbound[conn] = struct{}{}
		w.wg.Add(1)
		w.mu.Unlock()
		go w.serve(conn)
	}
}

// serve answers the AppendEntries requests of one inbound connection, in
// order, until it fails or the wire closes.
func (w *binaryWire) serve(conn net.Conn) {
	defer w.wg.Done()
	defer func() {
		conn.Close()
		w.mu.Lock()
		delete(w.inbound, conn)
		w.mu.Unlock()
	}()
	r := bufio.NewReaderSize(conn, frameReadBuffer)
	var hdr [frameHeaderBytes]byte
	var out []byte
	respCh := make(chan raft.RPCResponse, 1)
	for {
		body, err := readFrame(r, &hdr)
		if err != nil {
			if !isClosedConn(err) {
				w.log.Warn("raft skald-raft/2: reading a request failed; closing the connection",
					"remote", conn.RemoteAddr(), "err", err)
			}
			return
		}
		req, err := decodeAppendEntriesRequest(body)
		if err != nil {
			w.log.Error("raft skald-raft/2: closing a connection", "remote", conn.RemoteAddr(), "err", err)
			return
		}
		select {
		case w.consume <- raft.RPC{Command: req, RespChan: respCh}:
		case <-w.done:
			return
		}
		var res raft.RPCResponse
		select {
		case res = <-respCh:
		case <-w.done:
			return
		}
		resp, _ := res.Response.(*raft.AppendEntriesResponse)
		if resp == nil {
			resp = &raft.AppendEntriesResponse{}
			if res.Error == nil {
				res.Error = fmt.Errorf("node: raft answered AppendEntries with %T", res.Response)
			}
		}
		if out, err = appendAppendEntriesResponse(out[:0], resp, res.Error); err != nil {
			w.log.Error("raft skald-raft/2: encoding an answer failed", "err", err)
			return
		}
		w.served.Add(1) // before the write: a caller that has the answer sees the count
		if _, err := conn.Write(out); err != nil {
			return
		}
	}
}

func isClosedConn(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// close ends every connection of the wire and waits for its goroutines.
// The port itself is closed by NetworkTransport.Close.
func (w *binaryWire) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	close(w.done)
	for _, conns := range w.idle {
		for _, c := range conns {
			c.conn.Close()
		}
	}
	clear(w.idle)
	for c := range w.inbound {
		c.Close()
	}
	w.mu.Unlock()
}

// wait blocks until the wire's goroutines have returned (after close and
// the port's Close).
func (w *binaryWire) wait() { w.wg.Wait() }
