package kurrentdb

import (
	"context"
	"crypto/rand"
	"math"
	"regexp"
	"strings"

	"connectrpc.com/connect"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
	"google.golang.org/protobuf/types/known/timestamppb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/rpc"
)

// defaultWindow is the filter window when the client gives none: the
// events a filtered subscription considers between checkpoints, times
// the checkpoint multiplier.
const defaultWindow = 32

// maxRegexBytes bounds a filter's regular expression.
const maxRegexBytes = 4 << 10

// catchUp is one catch-up subscription being served: a Skald Subscribe
// of a stream or of the whole namespace, its messages translated, and
// for $all filtered here (Skald's Subscribe has no filter).
//
// Invariants: the confirmation is the first message sent and nothing is
// sent before the request was validated; every event is sent after the
// one before it in Skald's order (the Subscribe never skips or
// repeats); caught_up is sent once, after the stored events.
type catchUp struct {
	out        *connect.ServerStream[streams.ReadResp]
	ev         reader       // translates events (its count unused)
	filter     *eventFilter // nil: every event
	all        bool
	interval   uint64 // events considered between checkpoints (filtered only)
	considered uint64 // since the last checkpoint
	last       *skaldv1.Message
}

// subscribe serves Streams.Read with the subscription option: a
// catch-up subscription to a stream or to $all, starting after a
// revision or position, at the start, or at the end (only new events).
func (s *Server) subscribe(ctx context.Context, c rpc.Caller, o *streams.ReadReq_Options,
	out *connect.ServerStream[streams.ReadResp]) error {
	if o.GetReadDirection() == streams.ReadReq_Options_Backwards {
		return invalid("a subscription reads forwards only")
	}
	sub := &catchUp{out: out, ev: reader{structured: o.GetUuidOption().GetString_() == nil}}
	var req *skaldv1.SubscribeRequest
	switch so := o.GetStreamOption().(type) {
	case *streams.ReadReq_Options_Stream:
		if o.GetFilter() != nil {
			return invalid("a subscription to a stream cannot be filtered: filter a subscription to $all")
		}
		r, err := s.streamSubscription(ctx, c, so.Stream)
		if err != nil {
			return err
		}
		req = r
	case *streams.ReadReq_Options_All:
		r, err := s.allSubscription(ctx, c, so.All)
		if err != nil {
			return err
		}
		req, sub.all = r, true
		if f := o.GetFilter(); f != nil {
			if sub.filter, sub.interval, err = newEventFilter(f); err != nil {
				return err
			}
		}
	default:
		return invalid("a subscription must name a stream or $all")
	}
	if err := s.local.PermitRequest(c, skaldv1connect.EventStoreSubscribeProcedure, req); err != nil {
		return fromSkald(err, "subscribe")
	}
	if err := out.Send(&streams.ReadResp{Content: &streams.ReadResp_Confirmation{
		Confirmation: &streams.ReadResp_SubscriptionConfirmation{SubscriptionId: rand.Text()}}}); err != nil {
		return err
	}
	err := s.local.Subscribe(ctx, c, req, sub.handle)
	if ctx.Err() != nil {
		return nil // the client went
	}
	if err != nil {
		return fromSkald(err, "subscribe")
	}
	return nil
}

// streamSubscription is the Skald Subscribe of a subscription to one
// stream: after a revision, from its start, or after its current end. A
// hard-deleted stream is KurrentDB's stream-deleted error.
func (s *Server) streamSubscription(ctx context.Context, c rpc.Caller, o *streams.ReadReq_Options_StreamOptions) (
	*skaldv1.SubscribeRequest, error) {
	name := string(o.GetStreamIdentifier().GetStreamName())
	if name == "" {
		return nil, invalid("a subscription to a stream must name the stream")
	}
	current, err := s.version(ctx, c, name)
	if err != nil {
		return nil, err
	}
	var from int64
	switch v := o.GetRevisionOption().(type) {
	case *streams.ReadReq_Options_StreamOptions_Start:
	case *streams.ReadReq_Options_StreamOptions_End:
		from = current + 1 // current is -1 for a stream with no event yet
	case *streams.ReadReq_Options_StreamOptions_Revision:
		if v.Revision >= math.MaxInt64 {
			return nil, invalid("revision %d of stream %q is past any revision", v.Revision, name)
		}
		from = int64(v.Revision) + 1
	default:
		return nil, invalid("a subscription to stream %q must start at its start, its end or after a revision", name)
	}
	return &skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Stream{Stream: name}, Position: from}, nil
}

// allSubscription is the Skald Subscribe of a subscription to $all:
// after a position, from the start, or after the last event.
func (s *Server) allSubscription(ctx context.Context, c rpc.Caller, o *streams.ReadReq_Options_AllOptions) (
	*skaldv1.SubscribeRequest, error) {
	var from int64
	switch v := o.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Start:
		from = 1
	case *streams.ReadReq_Options_AllOptions_End:
		page, err := s.local.ReadAll(ctx, c, &skaldv1.ReadAllRequest{GlobalPosition: -1, Limit: 1, Backward: true})
		if err != nil {
			return nil, fromSkald(err, "read the end of $all")
		}
		from = 1
		if msgs := page.GetMessages(); len(msgs) > 0 {
			from = msgs[0].GetGlobalPosition() + 1
		}
	case *streams.ReadReq_Options_AllOptions_Position:
		p := v.Position.GetCommitPosition()
		if p >= math.MaxInt64 {
			return nil, invalid("position %d of $all is past any position", p)
		}
		from = int64(p) + 1
	default:
		return nil, invalid("a subscription to $all must start at its start, its end or after a position")
	}
	return &skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_All{All: true}, GlobalPosition: from}, nil
}

// handle sends what one Skald subscription response means to the
// client: an event (if it passes the filter), a checkpoint every
// interval events considered, caught_up with the server's time and
// where it caught up. Heartbeats are not sent: HTTP/2 keeps the stream.
func (sub *catchUp) handle(m *skaldv1.SubscribeResponse) error {
	switch e := m.GetEvent().(type) {
	case *skaldv1.SubscribeResponse_Message:
		sub.last = e.Message
		if sub.filter == nil || sub.filter.match(e.Message) {
			ev := &streams.ReadResp{Content: &streams.ReadResp_Event{Event: sub.ev.event(e.Message)}}
			if err := sub.out.Send(ev); err != nil {
				return err
			}
		}
		if sub.filter == nil {
			return nil
		}
		if sub.considered++; sub.considered >= sub.interval {
			sub.considered = 0
			pos := uint64(e.Message.GetGlobalPosition())
			return sub.out.Send(&streams.ReadResp{Content: &streams.ReadResp_Checkpoint_{
				Checkpoint: &streams.ReadResp_Checkpoint{CommitPosition: pos, PreparePosition: pos,
					Timestamp: timestamppb.Now()}}})
		}
	case *skaldv1.SubscribeResponse_CaughtUp:
		up := &streams.ReadResp_CaughtUp{Timestamp: timestamppb.Now()}
		if sub.last != nil {
			if sub.all {
				pos := uint64(sub.last.GetGlobalPosition())
				up.Position = &streams.ReadResp_Position{CommitPosition: pos, PreparePosition: pos}
			} else {
				rev := sub.last.GetPosition()
				up.StreamRevision = &rev
			}
		}
		return sub.out.Send(&streams.ReadResp{Content: &streams.ReadResp_CaughtUp_{CaughtUp: up}})
	}
	return nil
}

// eventFilter is a $all subscription's filter: on the stream name or the
// event type, by any of some prefixes or by a regular expression.
type eventFilter struct {
	onType   bool
	prefixes []string
	re       *regexp.Regexp
}

// newEventFilter validates f and returns its filter and its checkpoint
// interval (window times multiplier, each at least 1).
func newEventFilter(f *streams.ReadReq_Options_FilterOptions) (*eventFilter, uint64, error) {
	var expr *streams.ReadReq_Options_FilterOptions_Expression
	out := &eventFilter{}
	switch v := f.GetFilter().(type) {
	case *streams.ReadReq_Options_FilterOptions_StreamIdentifier:
		expr = v.StreamIdentifier
	case *streams.ReadReq_Options_FilterOptions_EventType:
		expr, out.onType = v.EventType, true
	default:
		return nil, 0, invalid("a filter must be on the stream name or on the event type")
	}
	switch {
	case expr.GetRegex() != "" && len(expr.GetPrefix()) > 0:
		return nil, 0, invalid("a filter has either prefixes or a regular expression, not both")
	case expr.GetRegex() != "":
		if len(expr.GetRegex()) > maxRegexBytes {
			return nil, 0, invalid("the filter's regular expression is %d bytes (limit %d)", len(expr.GetRegex()), maxRegexBytes)
		}
		re, err := regexp.Compile(expr.GetRegex())
		if err != nil {
			return nil, 0, invalid("the filter's regular expression %q: %v", expr.GetRegex(), err)
		}
		out.re = re
	case len(expr.GetPrefix()) > 0:
		if len(expr.GetPrefix()) > 1000 {
			return nil, 0, invalid("the filter has %d prefixes (limit 1000)", len(expr.GetPrefix()))
		}
		out.prefixes = expr.GetPrefix()
	default:
		return nil, 0, invalid("a filter needs prefixes or a regular expression")
	}
	window := uint64(defaultWindow)
	if m, ok := f.GetWindow().(*streams.ReadReq_Options_FilterOptions_Max); ok && m.Max > 0 {
		window = uint64(m.Max)
	}
	return out, window * uint64(max(f.GetCheckpointIntervalMultiplier(), 1)), nil
}

// match reports whether m passes the filter.
func (f *eventFilter) match(m *skaldv1.Message) bool {
	s := m.GetStream()
	if f.onType {
		s = m.GetType()
	}
	if f.re != nil {
		return f.re.MatchString(s)
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
