package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/anypb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
)

// AppendStream serves many appends over one stream. Each request is an
// Append of its own (s.append: the same checks, one log entry, the same
// errors) run on a goroutine of its own, and answered with its id as soon
// as it is decided, in any order. INVARIANTS: at most s.streamInFlight
// requests are in flight (received, not answered): one more is answered
// ResourceExhausted at once, not applied, and the stream goes on; every
// request received is answered before the stream ends with a status (the
// handler returns only once every request's goroutine has ended and
// sent), so a client may take a request without an answer at such an
// end for one the server never read (client/appendstream.go does); only
// a stream whose answers cannot be written ends without them.
//
// The token was checked before the stream's body was read (beforeBody)
// and the role for AppendStream; each request's scope is checked here
// as the unary Append checks it (scopedConn leaves this stream alone).
// A follower proposes each request through the leader as it does a
// unary Append (node.Append forwards), so a client pinned to any member
// works; its errors carry the leader's address, and the stream's
// response headers do (leaderHint).
func (s *eventStore) AppendStream(ctx context.Context, stream *connect.BidiStream[skaldv1.AppendStreamRequest, skaldv1.AppendStreamResponse]) error {
	c := callerFrom(ctx)
	var (
		wg      sync.WaitGroup
		sendMu  sync.Mutex
		sendErr error
		slots   = make(chan struct{}, s.streamInFlight)
	)
	body, _ := ctx.Value(duplexKey{}).(*duplexBody)
	if body != nil {
		// A revoked credential or a client gone ends ctx: stop reading.
		stop := context.AfterFunc(ctx, body.end)
		defer body.finish()
		defer stop()
	}
	send := func(resp *skaldv1.AppendStreamResponse) {
		// Every answer from a follower names the leader, as every unary
		// reply does: the leader may change while the stream is open.
		resp.Leader, _ = s.hint.hint(skaldv1connect.EventStoreAppendStreamProcedure)
		sendMu.Lock()
		defer sendMu.Unlock()
		if sendErr != nil {
			return
		}
		if sendErr = stream.Send(resp); sendErr != nil && body != nil {
			body.end() // nobody reads the answers: stop reading requests
		}
	}
	for {
		req, err := stream.Receive()
		if err != nil {
			wg.Wait()
			sendMu.Lock()
			defer sendMu.Unlock()
			switch {
			case sendErr != nil:
				return sendErr
			case errors.Is(err, io.EOF): // the client closed its side
				return nil
			}
			return err
		}
		start := time.Now()
		select {
		case slots <- struct{}{}:
		default:
			err := connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
				"request %d: %d requests are in flight on this stream, at most %d: wait for an answer, or open another stream", req.Id, s.streamInFlight, s.streamInFlight))
			err.Meta().Set(OutcomeHeader, OutcomeNotApplied)
			s.metrics.observe(skaldv1connect.EventStoreAppendStreamProcedure, start, err)
			send(s.streamError(req.Id, err))
			continue
		}
		wg.Go(func() {
			reserveStack() // stack.go
			defer func() { <-slots }()
			resp, err := s.streamedAppend(ctx, c, req)
			s.metrics.observe(skaldv1connect.EventStoreAppendStreamProcedure, start, err)
			if err != nil {
				send(s.streamError(req.Id, err))
				return
			}
			send(&skaldv1.AppendStreamResponse{Id: req.Id, Result: &skaldv1.AppendStreamResponse_Append{Append: resp}})
		})
	}
}

// streamedAppend is one request of an AppendStream: the unary Append's
// checks and scope, under the request's own deadline (its timeout, at
// most the write timeout a unary reply has).
func (s *eventStore) streamedAppend(ctx context.Context, c caller, req *skaldv1.AppendStreamRequest) (*skaldv1.AppendResponse, error) {
	timeout := s.replyTimeout
	if t := req.Timeout; t != nil {
		if err := t.CheckValid(); err != nil || t.AsDuration() <= 0 {
			return nil, invalidField("timeout", "must be a positive duration, got %v", t.AsDuration())
		}
		timeout = min(timeout, t.AsDuration())
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if s.creds != nil {
		// Once a revoke returned, no request is admitted (the stream
		// itself ends within credentialRecheck).
		if err := stillValid(s.creds, c); err != nil {
			return nil, toConnect(context.Background(), s.log, err)
		}
	}
	if req.Append == nil {
		return nil, invalidField("append", "is missing: each request carries one append")
	}
	if err := checkKnown(req); err != nil {
		return nil, err
	}
	if err := permitScope(c, skaldv1connect.EventStoreAppendStreamProcedure, req.Append); err != nil {
		return nil, err
	}
	return s.append(ctx, req.Append)
}

// streamError is err as the unary Append would have returned it: code,
// message, details and the not-applied marker (send adds the leader's
// address from a follower).
func (s *eventStore) streamError(id uint64, err error) *skaldv1.AppendStreamResponse {
	ce := new(connect.Error)
	if !errors.As(err, &ce) {
		ce = connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
	out := &skaldv1.AppendStreamError{Code: ce.Code().String(), Message: ce.Message(),
		NotApplied: ce.Meta().Get(OutcomeHeader) == OutcomeNotApplied}
	for _, d := range ce.Details() {
		out.Details = append(out.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()})
	}
	return &skaldv1.AppendStreamResponse{Id: id, Result: &skaldv1.AppendStreamResponse_Error{Error: out}}
}
