package kurrentdb

import (
	"context"
	"net/http"
	"time"

	"github.com/skalddb/skald/rpc"
)

// The listener's bounds are the API port's (rpc.Limits, rpc.ConnCaps;
// docs/security.md), applied to gRPC's shapes of call:
//
//   - Connections: Options.Connections, the caps the API port's listener
//     shares (--max-connections, --max-connections-per-ip), checked
//     before TLS.
//   - Headers: rpc.ReadHeaderTimeout and rpc.MaxHeaderBytes.
//   - A request body must arrive within ReadTimeout of its headers
//     (net/http's deadline per HTTP/2 stream), except a bidirectional
//     stream's: a persistent subscription's acks come whenever its events
//     do, so it has none.
//   - A unary call, and an Append (one answer once the body is in), runs
//     under a context deadline WriteTimeout from its start, whatever the
//     client asked (the earlier of the two wins), and its reply must be
//     written by WriteTimeout + writeGrace: the grace lets the
//     DeadlineExceeded status itself out.
//   - A streamed reply (Read, catch-up and persistent subscriptions) has
//     no deadline in all, but each write must finish within WriteTimeout:
//     a client that stops reading loses the stream, an idle subscription
//     does not.
//   - A connection with no call in flight for IdleTimeout is closed.
//   - HTTP/2: at most maxStreams streams in flight on one connection;
//     one request message Options.MaxMessageBytes.

// maxStreams caps the streams in flight on one connection: Go's HTTP/2
// default, which the API port has, set here so that it is written down.
// Past it a client waits for a stream to end (grpc-go queues its calls).
const maxStreams = 250

// writeGrace is how long after a unary call's context deadline its reply
// may still be written.
const writeGrace = time.Second

// callKind is how a method's deadlines are set.
type callKind int

const (
	unaryCall    callKind = iota // context deadline and write deadline from the start
	serverStream                 // each write must progress
	bidiStream                   // no read deadline; each write must progress
)

// streamKinds are the served methods that are not unaryCall.
var streamKinds = map[string]callKind{
	readProcedure:   serverStream,
	psReadProcedure: bidiStream,
}

// configure sets srv's timeouts and HTTP/2 limits for l (defaults
// applied).
func configure(srv *http.Server, l rpc.Limits) {
	l.Configure(srv) // header, read and idle timeouts; header bytes
	if srv.HTTP2 == nil {
		srv.HTTP2 = &http.HTTP2Config{}
	}
	srv.HTTP2.MaxConcurrentStreams = maxStreams
}

// deadlines applies limits to each call by its kind (see above).
type deadlines struct {
	limits rpc.Limits // defaults applied
	next   http.Handler
}

func (d deadlines) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	switch streamKinds[r.URL.Path] {
	case unaryCall:
		ctx, cancel := context.WithTimeout(r.Context(), d.limits.WriteTimeout)
		defer cancel()
		_ = rc.SetWriteDeadline(time.Now().Add(d.limits.WriteTimeout + writeGrace))
		r = r.WithContext(ctx)
	case bidiStream:
		_ = rc.SetReadDeadline(time.Time{})
		w = &progressWriter{ResponseWriter: w, rc: rc, timeout: d.limits.WriteTimeout}
	case serverStream:
		w = &progressWriter{ResponseWriter: w, rc: rc, timeout: d.limits.WriteTimeout}
	}
	d.next.ServeHTTP(w, r)
}

// progressWriter gives each write and flush timeout to finish, and lifts
// the deadline once it has: a stream may stay quiet for any time, but
// not stall in a write.
type progressWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (p *progressWriter) Write(b []byte) (int, error) {
	_ = p.rc.SetWriteDeadline(time.Now().Add(p.timeout))
	defer func() { _ = p.rc.SetWriteDeadline(time.Time{}) }()
	return p.ResponseWriter.Write(b)
}

// Flush implements http.Flusher, which connect-go asserts.
func (p *progressWriter) Flush() {
	_ = p.rc.SetWriteDeadline(time.Now().Add(p.timeout))
	_ = p.rc.Flush()
	_ = p.rc.SetWriteDeadline(time.Time{})
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (p *progressWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }
