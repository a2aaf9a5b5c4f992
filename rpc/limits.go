package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/rpc/evdb"
)

// Limits bounds what one client can hold on the API port: time (read,
// write and idle timeouts), reply sizes (the page byte cap) and, through
// LimitListener, connections. The zero value means the defaults.
//
// Deadlines per request (deadlines below): reading a request, headers and
// body, must finish within ReadTimeout of its start, whatever the route
// (a client trickling a body is cut off there), except /import, whose
// deadline moves on by ReadTimeout with every MiB received, and by the
// time the handler spent away from the body (parsing records, replicating
// a chunk): the client is charged only for time the server waited for
// its bytes. Once the body
// is read net/http lifts the read deadline, so a long reply or stream is
// not cancelled by it. A unary reply must be written within WriteTimeout
// of the request's start. Streams (Subscribe, Consume, GET /subscribe)
// have no write deadline: they send their
// own heartbeats, and a reader that stalls costs one page at most.
// Downloads (/admin/backup, pprof profiles and traces), /import's
// progress events and EventoDB's batchSize -1 replies must make progress:
// each write must finish within WriteTimeout.
type Limits struct {
	// ReadTimeout bounds reading one request (headers and body). Default
	// DefaultReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds a unary reply from the request's start, and one
	// write of a download or streamed reply. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection with no request in flight for this
	// long. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// PageBytes caps the messages of one read's reply (Connect reads stop
	// early with truncated set; EventoDB's stream.get and category.get
	// return a shorter batch). Default DefaultPageBytes.
	PageBytes int
	// ReplyBudgetBytes bounds the bytes of replies the node holds read
	// and not yet written, over every connection (replybudget.go): a read
	// past it waits up to ReplyBudgetWait, then is refused with
	// ResourceExhausted (EventoDB 503 SERVER_BUSY). Default
	// DefaultReplyBudgetBytes.
	ReplyBudgetBytes int64
	// ReplyBudgetWait is how long a read waits for room in the reply
	// budget before it is refused. Default DefaultReplyBudgetWait.
	ReplyBudgetWait time.Duration
	// ScanBudget bounds the entries one Connect read (or one page of a
	// subscription) examines and does not return: a filtered read that
	// spends it replies with what it found and resume_from (fsm
	// View.SetScanBudget). Default DefaultScanBudget.
	ScanBudget int
	// UnknownTokenPace is the shortest time between two leader round
	// trips made to check tokens this node does not know (auth.go).
	// Default DefaultUnknownTokenPace.
	UnknownTokenPace time.Duration
	// UnknownTokenTTL is how long a token found unknown is answered
	// unknown without a round trip; namespace creates wait a little
	// longer than this before they are acknowledged (auth.go). Default
	// DefaultUnknownTokenTTL; negative remembers nothing (and creates do
	// not wait).
	UnknownTokenTTL time.Duration
	// AppendStreamInFlight caps the requests in flight (received, not yet
	// answered) on one EventStore.AppendStream: one more is answered
	// ResourceExhausted, not applied, and the stream goes on. Default
	// DefaultAppendStreamInFlight.
	AppendStreamInFlight int
}

// Defaults of Limits.
const (
	DefaultReadTimeout  = 30 * time.Second
	DefaultWriteTimeout = 60 * time.Second
	DefaultIdleTimeout  = 2 * time.Minute
	// DefaultPageBytes keeps a Connect read's reply under gRPC's default
	// 4 MiB receive limit (Message.Size bounds a message's encoding).
	DefaultPageBytes = 3 << 20
	// DefaultReplyBudgetBytes lets 341 full pages of the default page cap
	// wait for their clients at once, far more reads than two cores serve
	// at a time, while the heap they hold stays near 2 GiB (a page and its
	// encoding) whatever --max-connections is.
	DefaultReplyBudgetBytes = 1 << 30
	// DefaultReplyBudgetWait is long enough for a burst of replies in
	// flight to drain, short enough that a refused client learns so well
	// within its own timeout.
	DefaultReplyBudgetWait = time.Second
	// DefaultScanBudget bounds a filtered read at about a quarter of a
	// second of one core at worst: a scan that decodes every message
	// (ReadAll by stream prefix) takes 230-280 ms per 100,000 here
	// (fsm BenchmarkReadAllTypes/scan, 2 cores, loaded); a category
	// scan that skips on its index value costs a fraction of that.
	DefaultScanBudget       = 100_000
	DefaultUnknownTokenPace = 20 * time.Millisecond
	DefaultUnknownTokenTTL  = 250 * time.Millisecond
	// DefaultAppendStreamInFlight is twice what the Go client puts on one
	// stream, and bounds a stream's requests held in memory at 128 × 16 MiB
	// at worst (connections and streams per connection bound the rest).
	DefaultAppendStreamInFlight = 128
	// ReadHeaderTimeout bounds the request line and headers.
	ReadHeaderTimeout = 10 * time.Second
	// MaxHeaderBytes bounds the request headers.
	MaxHeaderBytes = 1 << 20
)

// importDeadlineStep is how much of an /import body moves its read
// deadline on by one ReadTimeout: an import must stream at least this
// much per ReadTimeout of the server waiting for it (35 KiB/s at the
// default).
const importDeadlineStep = 1 << 20

// importAwaySlack is how much time away from the body (progressBody)
// accumulates before the read deadline is moved on by it: the client
// is never charged more than this for the server's own work, and a fast
// body does not move the deadline on every read.
const importAwaySlack = 10 * time.Millisecond

// maxBodyBytes bounds every request body but /import's (checked before
// anything reads it): the largest request
// (maxRequestBytes) plus room for gRPC framing.
const maxBodyBytes = maxRequestBytes + 64<<10

// WithDefaults returns l with every limit not set at its default, as
// the API handler applies them.
func (l Limits) WithDefaults() Limits { return l.withDefaults() }

func (l Limits) withDefaults() Limits {
	orDefault(&l.ReadTimeout, DefaultReadTimeout)
	orDefault(&l.WriteTimeout, DefaultWriteTimeout)
	orDefault(&l.IdleTimeout, DefaultIdleTimeout)
	orDefault(&l.PageBytes, DefaultPageBytes)
	orDefault(&l.ScanBudget, DefaultScanBudget)
	orDefault(&l.ReplyBudgetBytes, DefaultReplyBudgetBytes)
	orDefault(&l.ReplyBudgetWait, DefaultReplyBudgetWait)
	orDefault(&l.UnknownTokenPace, DefaultUnknownTokenPace)
	orDefault(&l.AppendStreamInFlight, DefaultAppendStreamInFlight)
	switch {
	case l.UnknownTokenTTL == 0:
		l.UnknownTokenTTL = DefaultUnknownTokenTTL
	case l.UnknownTokenTTL < 0:
		l.UnknownTokenTTL = 0
	}
	return l
}

// orDefault sets *v to d when it is zero or less: not configured.
func orDefault[T int | int64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Configure sets srv's connection timeouts for serving NewHandler with
// these limits: header, read and idle timeouts. It leaves
// srv.WriteTimeout zero, since a server-wide write timeout would cut
// every stream: the handler sets write deadlines per request instead.
func (l Limits) Configure(srv *http.Server) {
	l = l.withDefaults()
	srv.ReadHeaderTimeout = min(ReadHeaderTimeout, l.ReadTimeout)
	srv.ReadTimeout = l.ReadTimeout
	srv.IdleTimeout = l.IdleTimeout
	srv.WriteTimeout = 0
	srv.MaxHeaderBytes = MaxHeaderBytes
}

// route is how a request's deadlines are set.
type route int

const (
	routeUnary    route = iota // read deadline, then a write deadline from the start
	routeStream                // read deadline, no write deadline
	routeDownload              // no body; each write must progress
	routeUpload                // /import: progress for reads and writes
	routeDuplex                // AppendStream: each message read in time, each write progressing
)

func routeOf(r *http.Request) route {
	switch r.URL.Path {
	case skaldv1connect.EventStoreSubscribeProcedure, skaldv1connect.SubscriptionsConsumeProcedure, "/subscribe":
		return routeStream
	case "/admin/backup", "/debug/pprof/profile", "/debug/pprof/trace":
		return routeDownload
	case "/import":
		return routeUpload
	case skaldv1connect.EventStoreAppendStreamProcedure:
		return routeDuplex
	}
	return routeUnary
}

// deadlines applies Limits to each request (see Limits): it sets the
// request's deadlines by route and caps its body.
type deadlines struct {
	limits Limits
	errw   *connect.ErrorWriter // answers RPC clients in their protocol
	next   http.Handler
}

func (d deadlines) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	kind := routeOf(r)
	if r.ProtoMajor == 2 && kind == routeUnary {
		reserveStack() // a goroutine of its own: stack.go
	}
	// A duplex stream's messages are capped one by one (connect-go's
	// read limit), not the body they arrive in.
	capped := kind != routeUpload && kind != routeDuplex
	if capped && r.ContentLength > maxBodyBytes {
		// Refused before a byte of it is read; the connection closes.
		msg := fmt.Sprintf("request body is larger than %d bytes (%d)", maxBodyBytes, r.ContentLength)
		w.Header().Set("Connection", "close")
		if isRPC(r) && d.errw.IsSupported(r) {
			_ = d.errw.Write(w, r, connect.NewError(connect.CodeResourceExhausted, errors.New(msg)))
		} else {
			evdb.WriteError(w, evdb.Invalid("%s", msg))
		}
		return
	}
	switch kind {
	case routeUnary:
		_ = rc.SetWriteDeadline(time.Now().Add(d.limits.WriteTimeout))
	case routeDownload:
		w = &progressWriter{ResponseWriter: w, rc: rc, timeout: d.limits.WriteTimeout}
	case routeUpload:
		w = &progressWriter{ResponseWriter: w, rc: rc, timeout: d.limits.WriteTimeout}
	case routeDuplex:
		w = &progressWriter{ResponseWriter: w, rc: rc, timeout: d.limits.WriteTimeout}
		if r.Body != nil && r.Body != http.NoBody {
			b := &duplexBody{ReadCloser: r.Body, rc: rc, read: d.limits.ReadTimeout, idle: d.limits.IdleTimeout}
			b.between()
			r.Body = b
			r = r.WithContext(context.WithValue(r.Context(), duplexKey{}, b))
		}
	}
	if r.Body != nil && r.Body != http.NoBody {
		if kind == routeUpload {
			r.Body = newProgressBody(r.Body, rc, d.limits.ReadTimeout, time.Now())
		}
		if capped {
			r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		}
	}
	d.next.ServeHTTP(w, r)
}

// progressBody moves the read deadline on by timeout for every
// importDeadlineStep bytes read, and by the time the handler spent
// between two reads (its own work is not the client's delay). At the
// body's end net/http lifts the deadline itself (so the background read
// of HTTP/1.1 cannot cancel the request); no read after the one that
// ended the body sets it again, and neither does the last read itself
// (deadlines are set before a read, never after one that failed).
type progressBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	timeout  time.Duration
	since    int64     // bytes since the deadline last moved on by timeout
	deadline time.Time // the read deadline in force
	returned time.Time // when the last read returned; zero before the first
	away     time.Duration
	ended    bool // a read failed or hit the end: leave the deadline alone
}

// newProgressBody wraps body; start is when the request began, from
// which net/http's own read deadline (timeout) runs.
func newProgressBody(body io.ReadCloser, rc *http.ResponseController, timeout time.Duration, start time.Time) *progressBody {
	return &progressBody{ReadCloser: body, rc: rc, timeout: timeout, deadline: start.Add(timeout)}
}

func (b *progressBody) Read(p []byte) (int, error) {
	if !b.ended && !b.returned.IsZero() {
		if b.away += time.Since(b.returned); b.away >= importAwaySlack {
			b.deadline = b.deadline.Add(b.away)
			b.away = 0
			_ = b.rc.SetReadDeadline(b.deadline)
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.since += int64(n)
	if err != nil {
		b.ended = true
	} else if b.since >= importDeadlineStep {
		b.since, b.away = 0, 0
		b.deadline = time.Now().Add(b.timeout)
		_ = b.rc.SetReadDeadline(b.deadline)
	}
	b.returned = time.Now()
	return n, err
}

// progressWriter gives each write timeout to finish: a reply may take any
// time in all as long as the client keeps reading.
type progressWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (p *progressWriter) Write(b []byte) (int, error) {
	_ = p.rc.SetWriteDeadline(time.Now().Add(p.timeout))
	return p.ResponseWriter.Write(b)
}

// Flush implements http.Flusher for handlers that assert it.
func (p *progressWriter) Flush() {
	_ = p.rc.SetWriteDeadline(time.Now().Add(p.timeout))
	_ = p.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (p *progressWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// duplexBody bounds the reads of a bidirectional stream's body (an
// AppendStream's requests) message by message, following the 5-byte
// envelope (flags, big-endian length) that frames every message in both
// the Connect and the gRPC protocol: between messages the client has
// idle (Limits.IdleTimeout) to begin the next one, and a message must
// arrive whole within read (Limits.ReadTimeout) of its first byte, as a
// unary request's body must. So a stream nobody uses ends like an idle
// connection, and a message trickled in costs no more than a unary one.
type duplexBody struct {
	io.ReadCloser
	rc         *http.ResponseController
	read, idle time.Duration
	hdr        [5]byte
	hdrN       int   // bytes of the current envelope prefix seen
	left       int64 // bytes of the current message still to come
	ended      atomic.Bool

	mu   sync.Mutex // end against finish: rc is not to be used once the handler returned
	done bool
}

// duplexKey is the request context's key of its *duplexBody.
type duplexKey struct{}

func (b *duplexBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && err == nil {
		b.advance(p[:n])
	}
	return n, err
}

// advance follows the envelopes through p and moves the read deadline:
// idle from now when p ends between messages, read from now when it ends
// inside a message that began in p.
func (b *duplexBody) advance(p []byte) {
	began := false
	for len(p) > 0 {
		if b.left > 0 {
			k := min(int64(len(p)), b.left)
			b.left -= k
			p = p[k:]
			continue
		}
		if b.hdrN == 0 {
			began = true
		}
		k := copy(b.hdr[b.hdrN:], p)
		b.hdrN += k
		p = p[k:]
		if b.hdrN == len(b.hdr) {
			b.left = int64(binary.BigEndian.Uint32(b.hdr[1:]))
			b.hdrN = 0
		}
	}
	switch {
	case b.hdrN == 0 && b.left == 0:
		b.between()
	case began:
		b.setDeadline(time.Now().Add(b.read))
	}
}

// between gives the client idle to begin its next message.
func (b *duplexBody) between() { b.setDeadline(time.Now().Add(b.idle)) }

func (b *duplexBody) setDeadline(t time.Time) {
	_ = b.rc.SetReadDeadline(t)
	if b.ended.Load() { // end won the race: keep the body ended
		_ = b.rc.SetReadDeadline(time.Now())
	}
}

// end makes the body's pending and later reads fail at once: the handler
// stops receiving (its replies can no longer be written).
func (b *duplexBody) end() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.ended.Store(true)
	_ = b.rc.SetReadDeadline(time.Now())
}

// finish is called as the handler returns: end does nothing after it.
func (b *duplexBody) finish() {
	b.mu.Lock()
	b.done = true
	b.mu.Unlock()
}
