package kurrentdb

import (
	"context"
	"errors"
	"math"
	"strconv"

	"connectrpc.com/connect"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/rpc"
)

// readPage is the most messages one Skald read of a KurrentDB read
// asks for; a read of more is served page by page.
const readPage = 500

// read serves Streams.Read with a count: a stream or $all, forwards or
// backwards. It sends only event messages, or for a stream that has no
// message one stream_not_found (a plain read may carry nothing else: the
// Go client panics on any other message). A subscription is served by
// subscribe; a filtered read is refused before anything is sent.
func (s *Server) read(ctx context.Context, req *connect.Request[streams.ReadReq],
	out *connect.ServerStream[streams.ReadResp]) error {
	c, ok := callerFrom(ctx)
	if !ok {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("no caller admitted"))
	}
	o := req.Msg.GetOptions()
	if o == nil {
		return invalid("a Read must give its options")
	}
	if o.GetSubscription() != nil {
		return s.subscribe(ctx, c, o, out)
	}
	if o.GetFilter() != nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("filtered reads are not served: filter a subscription"))
	}
	r := reader{s: s, c: c, out: out, count: o.GetCount(),
		backward:   o.GetReadDirection() == streams.ReadReq_Options_Backwards,
		structured: o.GetUuidOption().GetString_() == nil}
	switch so := o.GetStreamOption().(type) {
	case *streams.ReadReq_Options_Stream:
		return r.stream(ctx, so.Stream)
	case *streams.ReadReq_Options_All:
		return r.all(ctx, so.All)
	default:
		return invalid("a Read must name a stream or $all")
	}
}

// reader is one Read being served.
type reader struct {
	s          *Server
	c          rpc.Caller
	out        *connect.ServerStream[streams.ReadResp]
	count      uint64 // events still to send
	backward   bool
	structured bool // ids in the structured form, else as strings
}

// stream reads one stream from its start, its end or a revision. A
// stream with no event left to read (none ever, or all deleted: a soft
// delete keeps the stream's revision) is stream_not_found, as KurrentDB
// answers a deleted stream.
func (r *reader) stream(ctx context.Context, o *streams.ReadReq_Options_StreamOptions) error {
	id := o.GetStreamIdentifier()
	name := string(id.GetStreamName())
	current, err := r.s.version(ctx, r.c, name)
	if err != nil {
		return err
	}
	if current < 0 {
		return r.notFound(id)
	}
	from, ok, err := streamStart(o, r.backward, name)
	if err != nil {
		return err
	}
	wanted := r.count
	if ok {
		if err := r.streamFrom(ctx, name, from); err != nil {
			return err
		}
	}
	if wanted == 0 || r.count < wanted {
		return nil
	}
	page, err := r.s.local.ReadStream(ctx, r.c, &skaldv1.ReadStreamRequest{Stream: name, Limit: 1})
	if err != nil {
		return fromSkald(err, "read %q", name)
	}
	if len(page.GetMessages()) == 0 && !page.GetTruncated() && page.ResumeFrom == nil {
		return r.notFound(id)
	}
	return nil
}

// notFound sends stream_not_found for the stream of id.
func (r *reader) notFound(id *shared.StreamIdentifier) error {
	return r.out.Send(&streams.ReadResp{Content: &streams.ReadResp_StreamNotFound_{
		StreamNotFound: &streams.ReadResp_StreamNotFound{
			StreamIdentifier: &shared.StreamIdentifier{StreamName: id.GetStreamName()}},
	}})
}

// streamStart is the Skald position a read of a stream starts at (-1:
// backwards from the end); ok false means nothing can follow (forwards
// from the end).
func streamStart(o *streams.ReadReq_Options_StreamOptions, backward bool, name string) (int64, bool, error) {
	switch v := o.GetRevisionOption().(type) {
	case *streams.ReadReq_Options_StreamOptions_Start:
		return 0, true, nil
	case *streams.ReadReq_Options_StreamOptions_End:
		return -1, backward, nil
	case *streams.ReadReq_Options_StreamOptions_Revision:
		if v.Revision > math.MaxInt64 {
			return -1, backward, nil
		}
		return int64(v.Revision), true, nil
	default:
		return 0, false, invalid("a Read of stream %q must start at its start, its end or a revision", name)
	}
}

// streamFrom sends the events of stream name from position from, page
// by page, until the count or the stream ends.
func (r *reader) streamFrom(ctx context.Context, name string, from int64) error {
	for r.count > 0 {
		limit := r.limit()
		page, err := r.s.local.ReadStream(ctx, r.c, &skaldv1.ReadStreamRequest{
			Stream: name, Position: from, Limit: limit, Backward: r.backward})
		if err != nil {
			return fromSkald(err, "read %q", name)
		}
		if err := r.send(page.GetMessages()); err != nil {
			return err
		}
		next, more := resume(page.GetMessages(), page.GetTruncated(), page.ResumeFrom, r.backward, false, int(limit))
		if !more || (r.backward && next < 0) {
			return nil
		}
		from = next
	}
	return nil
}

// all reads $all from its start, its end or a position: forwards from a
// position includes the event at it, backwards from a position starts
// with the event before it.
func (r *reader) all(ctx context.Context, o *streams.ReadReq_Options_AllOptions) error {
	var from int64
	switch v := o.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Start:
		if r.backward {
			return nil // nothing precedes the start
		}
		from = 1
	case *streams.ReadReq_Options_AllOptions_End:
		if !r.backward {
			return nil
		}
		from = -1
	case *streams.ReadReq_Options_AllOptions_Position:
		p := v.Position.GetCommitPosition()
		switch {
		case p > math.MaxInt64:
			if !r.backward {
				return nil
			}
			from = -1
		case r.backward:
			if p <= 1 {
				return nil
			}
			from = int64(p) - 1
		default:
			from = max(int64(p), 1)
		}
	default:
		return invalid("a Read of $all must start at its start, its end or a position")
	}
	for r.count > 0 {
		limit := r.limit()
		page, err := r.s.local.ReadAll(ctx, r.c, &skaldv1.ReadAllRequest{
			GlobalPosition: from, Limit: limit, Backward: r.backward})
		if err != nil {
			return fromSkald(err, "read $all")
		}
		if err := r.send(page.GetMessages()); err != nil {
			return err
		}
		next, more := resume(page.GetMessages(), page.GetTruncated(), page.ResumeFrom, r.backward, true, int(limit))
		if !more || (r.backward && next < 1) {
			return nil
		}
		from = next
	}
	return nil
}

// limit is the size of the next page.
func (r *reader) limit() int64 { return int64(min(r.count, readPage)) }

// resume is where a read goes on after a page of msgs: more false when
// the page ended the read. global says the read's positions are global
// positions ($all), else stream revisions.
func resume(msgs []*skaldv1.Message, truncated bool, resumeFrom *int64, backward, global bool,
	limit int) (int64, bool) {
	if resumeFrom != nil {
		return *resumeFrom, true
	}
	if len(msgs) == 0 || (len(msgs) < limit && !truncated) {
		return 0, false
	}
	last := msgs[len(msgs)-1]
	pos := last.GetPosition()
	if global {
		pos = last.GetGlobalPosition()
	}
	if backward {
		return pos - 1, true
	}
	return pos + 1, true
}

// send sends msgs as events, at most the count still to send.
func (r *reader) send(msgs []*skaldv1.Message) error {
	for _, m := range msgs {
		if r.count == 0 {
			return nil
		}
		if err := r.out.Send(&streams.ReadResp{Content: &streams.ReadResp_Event{Event: r.event(m)}}); err != nil {
			return err
		}
		r.count--
	}
	return nil
}

// event is a Skald message as KurrentDB's ReadEvent: its revision, its
// global position as both commit and prepare position, its type,
// content type and creation time (decimal 100 ns ticks since the Unix
// epoch, which the clients parse as an integer).
func (r *reader) event(m *skaldv1.Message) *streams.ReadResp_ReadEvent {
	pos := uint64(m.GetGlobalPosition())
	var ticks int64
	if t := m.GetTime(); t != nil {
		ticks = t.AsTime().UnixNano() / 100
	}
	return &streams.ReadResp_ReadEvent{
		Event: &streams.ReadResp_ReadEvent_RecordedEvent{
			Id:               protoID(m.GetId(), r.structured),
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(m.GetStream())},
			StreamRevision:   uint64(m.GetPosition()),
			PreparePosition:  pos,
			CommitPosition:   pos,
			Metadata: map[string]string{
				keyType: m.GetType(), keyContentType: contentJSON, keyCreated: strconv.FormatInt(ticks, 10),
			},
			CustomMetadata: m.GetMetadata(),
			Data:           m.GetData(),
		},
		Position: &streams.ReadResp_ReadEvent_CommitPosition{CommitPosition: pos},
	}
}
