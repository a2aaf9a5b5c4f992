package kurrentdb

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/serverfeatures"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/rpc"
)

// The bounds tests serve the leader of a one-node fixture on a listener
// of their own, with the bounds under test in Options, and speak h2c.

// serveBounded serves f's leader, bound to testNamespace, with tweak
// applied to its Options, and returns its member and registry.
func serveBounded(t *testing.T, f *fixture, tweak func(*Options)) (*member, *prometheus.Registry) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	opts := Options{Namespace: testNamespace, Registerer: reg}
	tweak(&opts)
	serve(t, f.leader.tn, ln, nil, opts)
	return &member{tn: f.leader.tn, addr: ln.Addr().String()}, reg
}

// counter is the value of the counter named name in reg (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// h2cPreface starts an HTTP/2 connection: the client preface and an
// empty SETTINGS frame.
const h2cPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"

// served dials addr, starts HTTP/2 and reports whether the server
// answered with its own frames (true) or closed the connection first
// (false). The connection stays open until the test ends.
func served(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitTimeout)
	if err != nil {
		return false // refused at once: the close may reach the dial
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, h2cPreface); err != nil {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	var b [9]byte
	n, err := io.ReadFull(c, b[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("dial %s: neither served nor closed within %s", addr, waitTimeout)
	}
	return n == len(b)
}

// The listener's connections count against caps it shares with another
// listener (the API port's, in skald server): one address holds at most
// perIP of them in all. Past the cap a connection is closed before a byte
// is read and counted; a slot given back is taken again. Without the caps
// every connection is served.
func TestConnectionCapShared(t *testing.T) {
	f := start(t, 1, insecureMode)
	caps := rpc.NewConnCaps(0, 2)
	m, reg := serveBounded(t, f, func(o *Options) { o.Connections = caps })

	// The other listener holds one connection from 127.0.0.1.
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	otherCapped, err := caps.Listener(other, "other", "other", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otherCapped.Close() })
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := otherCapped.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	held, err := net.Dial("tcp", other.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	var serverSide net.Conn
	select {
	case serverSide = <-accepted:
	case <-time.After(waitTimeout):
		t.Fatal("the other listener accepted nothing")
	}

	// The official client takes the second slot and is served.
	cl := insecureClient(t, m)
	appendN(t, cl, "capped-1", 1)

	if served(t, m.addr) {
		t.Fatal("a third connection from 127.0.0.1 was served with --max-connections-per-ip 2")
	}
	if got := counter(t, reg, "skald_kurrentdb_connections_refused_per_ip_total"); got != 1 {
		t.Fatalf("skald_kurrentdb_connections_refused_per_ip_total = %v, want 1", got)
	}
	appendN(t, cl, "capped-1", 1) // the client's connection still works

	// The other listener's connection closes: its slot is free again.
	serverSide.Close()
	testutil.Until(t, waitTimeout, "a new connection to be served once a slot is free", func() (bool, string) {
		return served(t, m.addr), "refused"
	})
}

// watchedConn reports in closed when a read from it fails: the server
// ended the connection (or the transport closed it on the server's
// GOAWAY).
type watchedConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.once.Do(func() { close(c.closed) })
	}
	return n, err
}

// watchedClient is an h2c client whose connections are sent to conns as
// they are dialed.
func watchedClient(conns chan<- *watchedConn) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		w := &watchedConn{Conn: c, closed: make(chan struct{})}
		conns <- w
		return w, nil
	}}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// A connection with no call in flight for the idle timeout is closed;
// one with a subscription open is not idle, and its subscription goes on
// receiving past the idle timeout. Without the timeout the idle
// connection stays open.
func TestIdleConnectionClosed(t *testing.T) {
	const idle = time.Second
	f := start(t, 1, insecureMode)
	m, _ := serveBounded(t, f, func(o *Options) { o.Limits.IdleTimeout = idle })
	cl := insecureClient(t, m)
	appendN(t, cl, "idle-1", 1)
	sub, err := cl.SubscribeToStream(ctxT(t), "idle-1", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	d := &delivered{}
	until(t, sub, d, 1, true)

	conns := make(chan *watchedConn, 4)
	features := connect.NewClient[shared.Empty, serverfeatures.SupportedMethods](watchedClient(conns),
		"http://"+m.addr+featuresProcedure, connect.WithGRPC())
	if _, err := features.CallUnary(ctxT(t), connect.NewRequest(&shared.Empty{})); err != nil {
		t.Fatal(err)
	}
	conn := <-conns
	began := time.Now()
	select {
	case <-conn.closed:
		if took := time.Since(began); took < idle/2 {
			t.Fatalf("the connection closed %s after its call, before the idle timeout %s", took, idle)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("a connection idle for %s was not closed (idle timeout %s)", waitTimeout, idle)
	}

	// The subscription's connection outlived the idle timeout with its
	// stream open: a new event still reaches it.
	appendN(t, cl, "idle-1", 1)
	until(t, sub, d, 2, false)
}

// grpcFrame is msg's body as gRPC frames it, claiming length bytes
// (more than msg, for a body that never ends).
func grpcFrame(length int, msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(length))
	return append(b, msg...)
}

// A request whose body stops arriving is cut off at the read timeout,
// and nothing of it is done; without the timeout the call waits for the
// body for ever.
func TestStalledBodyCutOff(t *testing.T) {
	f := start(t, 1, insecureMode)
	m, _ := serveBounded(t, f, func(o *Options) { o.Limits.ReadTimeout = time.Second })
	cl := insecureClient(t, m)
	appendN(t, cl, "stalled-1", 1)

	stalledCutOff(t, m, "stalled-1")
	if got, err := readStream(t, cl, "stalled-1", kurrentdb.ReadStreamOptions{From: kurrentdb.Start{}}, 10); err != nil || len(got) != 1 {
		t.Fatalf("stalled-1 after the cut-off Delete: %d events, %v; want 1", len(got), err)
	}
}

// A persistent subscription's acks and nacks come whenever its events
// do: its bidirectional stream has no read deadline, and a nack sent
// after the read timeout is still read (the event comes back at once,
// long before its message timeout). With the read timeout on this stream
// the nack is never read.
func TestPersistentReadNoReadDeadline(t *testing.T) {
	f := start(t, 1, insecureMode)
	m, _ := serveBounded(t, f, func(o *Options) { o.Limits.ReadTimeout = time.Second })
	cl := insecureClient(t, m)
	appendN(t, cl, "acks-1", 1)
	if err := cl.CreatePersistentSubscription(ctxT(t), "acks-1", "g", fromStart()); err != nil {
		t.Fatal(err)
	}
	sub, err := cl.SubscribeToPersistentSubscription(ctxT(t), "acks-1", "g", kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	first := next(t, sub)
	stalledCutOff(t, m, "quiet-1") // the subscription has now been quiet for longer than the read timeout
	if err := sub.Nack("later", kurrentdb.NackActionRetry, first.Event); err != nil {
		t.Fatalf("nack after the read timeout: %v", err)
	}
	again := next(t, sub) // within ctxT's 20 s; the message timeout is 30 s
	if n := again.Event.OriginalEvent().EventNumber; n != 0 || again.RetryCount != 1 {
		t.Fatalf("after the nack: event %d, retry count %d; want event 0 retried once", n, again.RetryCount)
	}
}

// stalledCutOff sends m a Delete of stream whose body never ends (its
// frame claims more bytes than are sent) and
// returns once the read timeout cut it off (a wait on the server's
// clock, not the test's); it fails the test if the call still waits
// after waitTimeout.
func stalledCutOff(t *testing.T, m *member, stream string) {
	t.Helper()
	msg, err := proto.Marshal(deleteAny(stream))
	if err != nil {
		t.Fatal(err)
	}
	body, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+m.addr+deleteProcedure, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	go w.Write(grpcFrame(len(msg)+100, msg))
	resp, err := h2cClient().Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body) // to the trailers
		resp.Body.Close()
	}
	switch {
	case ctx.Err() != nil:
		t.Fatalf("a Delete whose body stalled was still waiting after %s", waitTimeout)
	case err != nil:
		return // the stream was reset: cut off
	}
	if status := resp.Trailer.Get("Grpc-Status"); status == "" || status == "0" {
		t.Fatalf("a stalled Delete answered grpc-status %q, want an error", status)
	}
}

// A unary call whose client sets no deadline gets the write timeout as
// its deadline: when the node cannot answer (the cluster lost its
// quorum), the call ends DeadlineExceeded instead of waiting for ever.
// A client's own earlier deadline still wins.
func TestUnaryDeadlineWithoutClientDeadline(t *testing.T) {
	const write = 2 * time.Second
	f := start(t, 3, insecureMode)
	m, _ := serveBounded(t, f, func(o *Options) { o.Limits.WriteTimeout = write })
	for _, other := range f.members {
		if other != f.leader {
			other.tn.Stop()
		}
	}
	del := connect.NewClient[streams.DeleteReq, streams.DeleteResp](h2cClient(), "http://"+m.addr+deleteProcedure,
		connect.WithGRPC())
	req := deleteAny("noquorum-1")
	for _, c := range []struct {
		name    string
		timeout time.Duration // 0: none sent
		want    time.Duration // about when the call ends
	}{
		{"no client deadline", 0, write},
		{"a later client deadline", time.Hour, write},
		{"an earlier client deadline", write / 4, write / 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background()) // no deadline
			defer cancel()
			if c.timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, c.timeout)
				defer cancel()
			}
			began := time.Now()
			done := make(chan error, 1)
			go func() {
				_, err := del.CallUnary(ctx, connect.NewRequest(req))
				done <- err
			}()
			select {
			case err := <-done:
				took := time.Since(began)
				if connect.CodeOf(err) != connect.CodeDeadlineExceeded {
					t.Fatalf("Delete without a quorum: %v, want DeadlineExceeded", err)
				}
				if took < c.want/2 || took > c.want+waitTimeout/2 {
					t.Fatalf("Delete ended after %s, want about %s", took, c.want)
				}
			case <-time.After(waitTimeout):
				t.Fatalf("Delete without a quorum still waiting after %s (write timeout %s)", waitTimeout, write)
			}
		})
	}
}

// deleteAny is a Delete of stream at any revision.
func deleteAny(stream string) *streams.DeleteReq {
	return &streams.DeleteReq{Options: &streams.DeleteReq_Options{
		StreamIdentifier:       &shared.StreamIdentifier{StreamName: []byte(stream)},
		ExpectedStreamRevision: &streams.DeleteReq_Options_Any{Any: &shared.Empty{}},
	}}
}
