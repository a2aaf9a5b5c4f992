package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Appends over EventStore.AppendStream: concurrent Append calls to one
// member share a few streams (Config.AppendStreams), opened lazily, each
// carrying up to streamInFlight appends, each append still one request
// with its own answer. The retry loop (call.go) is unchanged: an attempt
// sent on a stream returns the error the unary call would have (the
// server's code, message, details, not-applied marker and leader hint
// rebuilt as a wire error), and a stream that breaks fails only the
// appends in flight on it, with a client-side Unavailable that classify
// reads as an unknown outcome (a dial error inside: not sent). A member
// that answers Unimplemented before any answer (an older server, an
// HTTP/1.1 transport: connect-go refuses bidi streams there) is sent
// unary calls from then on, and so are appends past every stream's cap.

const (
	// streamInFlight is how many appends one stream carries at once: half
	// the server's default cap (rpc.DefaultAppendStreamInFlight), so a
	// server with the default never refuses one.
	streamInFlight = 64
	// streamSpread is how many appends every open stream carries before
	// another is opened.
	streamSpread = 16
	// streamIdle closes a stream that has carried nothing for this long
	// before it is used again, well inside the server's idle timeout (2
	// min by default), so an append is not sent on a stream the server
	// is about to end.
	streamIdle = 30 * time.Second
)

// errNoStream says an append was not sent on a stream: send it unary.
var errNoStream = errors.New("skald: no append stream")

// appendPool holds the AppendStreams to one member.
type appendPool struct {
	c   *Client
	m   *member
	max int

	mu      sync.Mutex
	streams []*appendStream
	off     bool // the member cannot stream: unary calls only
}

// appendStream is one AppendStream and the appends waiting on it.
type appendStream struct {
	pool   *appendPool
	conn   *connect.BidiStreamForClient[skaldv1.AppendStreamRequest, skaldv1.AppendStreamResponse]
	cancel context.CancelFunc
	sendMu sync.Mutex // Send is not safe for concurrent use

	// Under pool.mu:
	inFlight  int
	idleSince time.Time
	dead      bool

	mu       sync.Mutex
	next     uint64
	pending  map[uint64]chan streamAnswer
	answered bool  // any response came: the server serves AppendStream
	err      error // why the stream ended, once it has
}

type streamAnswer struct {
	resp *skaldv1.AppendResponse
	err  error
}

// poolOf returns m's pool, or nil once the client is closed or streams
// are off.
func (c *Client) poolOf(m *member) *appendPool {
	if c.cfg.AppendStreams < 0 {
		return nil
	}
	c.poolsMu.Lock()
	defer c.poolsMu.Unlock()
	if c.poolsClosed {
		return nil
	}
	p := c.pools[m]
	if p == nil {
		if c.pools == nil {
			c.pools = map[*member]*appendPool{}
		}
		p = &appendPool{c: c, m: m, max: c.cfg.AppendStreams}
		c.pools[m] = p
	}
	return p
}

// closePools ends every stream and waits for their readers (Close).
func (c *Client) closePools() {
	c.poolsMu.Lock()
	c.poolsClosed = true
	pools := c.pools
	c.pools = nil
	c.poolsMu.Unlock()
	var open []*appendStream
	for _, p := range pools {
		p.mu.Lock()
		open = append(open, p.streams...)
		p.mu.Unlock()
	}
	for _, s := range open {
		s.close()
	}
	c.streamsWG.Wait()
}

// appendOn sends req on one of m's streams and returns its answer, or
// errNoStream when it was not sent on one (send it unary).
func (c *Client) appendOn(ctx context.Context, m *member, req *skaldv1.AppendRequest) (*skaldv1.AppendResponse, error) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		// A traced append is a call of its own: a stream carries one
		// traceparent, sent when it opens.
		return nil, errNoStream
	}
	p := c.poolOf(m)
	if p == nil {
		return nil, errNoStream
	}
	s := p.acquire()
	if s == nil {
		return nil, errNoStream
	}
	defer p.release(s)
	resp, err := s.append(ctx, req)
	var ce *connect.Error
	if errors.As(err, &ce) && connect.IsWireError(err) && ce.Code() == connect.CodeResourceExhausted && ce.Meta().Get(outcomeHeader) == outcomeNotApplied {
		return nil, errNoStream // over the server's cap per stream: not applied
	}
	return resp, err
}

// acquire returns a stream with room for one more append, opening one
// when every open stream carries streamSpread, or nil (unary).
func (p *appendPool) acquire() *appendStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.off {
		return nil
	}
	live := p.streams[:0]
	for _, s := range p.streams {
		switch {
		case s.dead:
		case s.inFlight == 0 && time.Since(s.idleSince) > streamIdle:
			s.dead = true
			go s.close()
		default:
			live = append(live, s)
		}
	}
	clear(p.streams[len(live):])
	p.streams = live
	var best *appendStream
	for _, s := range p.streams {
		if best == nil || s.inFlight < best.inFlight {
			best = s
		}
	}
	if best == nil || (best.inFlight >= streamSpread && len(p.streams) < p.max) {
		if s := p.open(); s != nil {
			best = s
		}
	}
	if best == nil || best.inFlight >= streamInFlight {
		return nil
	}
	best.inFlight++
	return best
}

func (p *appendPool) release(s *appendStream) {
	p.mu.Lock()
	s.inFlight--
	if s.inFlight == 0 {
		s.idleSince = time.Now()
	}
	p.mu.Unlock()
}

// open starts a stream and its reader (p.mu held); nil once the client
// is closed.
func (p *appendPool) open() *appendStream {
	c := p.c
	c.poolsMu.Lock()
	defer c.poolsMu.Unlock()
	if c.poolsClosed {
		return nil
	}
	ctx, cancel := context.WithCancel(c.life)
	s := &appendStream{pool: p, cancel: cancel, pending: map[uint64]chan streamAnswer{}, idleSince: time.Now()}
	s.conn = p.m.events.AppendStream(ctx)
	p.streams = append(p.streams, s)
	c.streamsWG.Go(s.read)
	return s
}

// close ends the stream: its context, and its request body, which
// net/http's HTTP/2 transport is blocked reading while no append is sent
// (it notices the context only once the body ends).
func (s *appendStream) close() {
	s.cancel()
	s.sendMu.Lock()
	_ = s.conn.CloseRequest()
	s.sendMu.Unlock()
}

// append sends req and waits for its answer, the stream's end or ctx.
func (s *appendStream) append(ctx context.Context, req *skaldv1.AppendRequest) (*skaldv1.AppendResponse, error) {
	ch := make(chan streamAnswer, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.endError()
		s.mu.Unlock()
		return nil, err
	}
	id := s.next
	s.next++
	s.pending[id] = ch
	s.mu.Unlock()
	r := &skaldv1.AppendStreamRequest{Id: id, Append: req}
	if dl, ok := ctx.Deadline(); ok {
		r.Timeout = durationpb.New(max(time.Until(dl), time.Millisecond))
	}
	s.sendMu.Lock()
	_ = s.conn.Send(r)
	s.sendMu.Unlock()
	// A failed Send means the call failed: its reader's Receive returns
	// the reason (a dial error, the server's) and fails every pending
	// append with it; Send's own error only wraps io.EOF.
	select {
	case a := <-ch:
		return a.resp, a.err
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return nil, connect.NewError(connect.CodeOf(ctx.Err()), ctx.Err())
	}
}

// read delivers answers until the stream ends, then fails every append
// still waiting and takes the stream out of its pool.
func (s *appendStream) read() {
	hinted := false
	for {
		resp, err := s.conn.Receive()
		if err != nil {
			s.end(err)
			return
		}
		if !hinted && !s.pool.c.cfg.Pinned {
			hinted = true
			if addr := s.conn.ResponseHeader().Get(leaderHeader); addr != "" {
				s.pool.c.view.hint(addr)
			}
		}
		if resp.Leader != "" && !s.pool.c.cfg.Pinned {
			s.pool.c.view.hint(resp.Leader)
		}
		var a streamAnswer
		switch r := resp.Result.(type) {
		case *skaldv1.AppendStreamResponse_Append:
			a.resp = r.Append
		case *skaldv1.AppendStreamResponse_Error:
			a.err = streamedError(r.Error, resp.Leader)
		default:
			a.err = connect.NewError(connect.CodeUnknown, fmt.Errorf("append stream: answer %d holds neither a result nor an error", resp.Id))
		}
		s.mu.Lock()
		s.answered = true
		ch := s.pending[resp.Id]
		delete(s.pending, resp.Id)
		s.mu.Unlock()
		if ch != nil {
			ch <- a
		}
	}
}

// end records why the stream ended and fails the appends waiting on it.
func (s *appendStream) end(err error) {
	s.close()
	_ = s.conn.CloseResponse()
	p := s.pool
	p.mu.Lock()
	s.dead = true
	s.mu.Lock()
	s.err = err
	if s.unserved() {
		p.off = true // an older server, or HTTP/1.1: nothing was served
	}
	pending := s.pending
	s.pending = nil
	fail := s.endError()
	s.mu.Unlock()
	p.mu.Unlock()
	for _, ch := range pending {
		ch <- streamAnswer{err: fail}
	}
}

// endError is what an append on the ended stream gets (s.mu held):
// errNoStream when the server never served the stream (Unimplemented
// before any answer: nothing was applied); the server's own error,
// marked not applied, when it ended the stream with a status (it answers
// every request it read before it does: rpc's AppendStream, so these
// were never read); else a client-side Unavailable wrapping the cause,
// an unknown outcome for classify.
func (s *appendStream) endError() error {
	if s.unserved() {
		return errNoStream
	}
	var ce *connect.Error
	if errors.As(s.err, &ce) && connect.IsWireError(s.err) {
		e := connect.NewWireError(ce.Code(), errors.New(ce.Message()))
		for _, d := range ce.Details() {
			e.AddDetail(d)
		}
		e.Meta().Set(outcomeHeader, outcomeNotApplied)
		return e
	}
	// No address here: the *Error the call returns names the member.
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("append stream ended before the answer: %w", s.err))
}

// unserved reports a stream the server refused before serving (s.mu
// held): Unimplemented before any answer (a server without AppendStream;
// connect-go's own refusal of a bidi stream over HTTP/1.1), or the status
// 505 a Skald server answers a bidi stream over HTTP/1.1 with (connect-go
// reads it as Unknown, "HTTP status 505 ..."). Nothing was applied.
func (s *appendStream) unserved() bool {
	if s.answered || s.err == nil {
		return false
	}
	var ce *connect.Error
	switch {
	case connect.CodeOf(s.err) == connect.CodeUnimplemented:
		return true
	case errors.As(s.err, &ce) && ce.Code() == connect.CodeUnknown:
		return strings.HasPrefix(ce.Message(), "HTTP status 505")
	}
	return false
}

// streamedError is the unary call's error from an AppendStream answer: a
// wire error with its code, message, details and metadata.
func streamedError(e *skaldv1.AppendStreamError, leader string) error {
	var code connect.Code
	if err := code.UnmarshalText([]byte(e.Code)); err != nil {
		code = connect.CodeUnknown
	}
	ce := connect.NewWireError(code, errors.New(e.Message))
	for _, d := range e.Details {
		if ed, err := connect.NewErrorDetail(d); err == nil {
			ce.AddDetail(ed)
		}
	}
	if e.NotApplied {
		ce.Meta().Set(outcomeHeader, outcomeNotApplied)
	}
	if leader != "" {
		ce.Meta().Set(leaderHeader, leader)
	}
	return ce
}
