package kurrentdb

import (
	"context"
	"errors"
	"fmt"
	"math"

	"connectrpc.com/connect"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/rpc"
)

// Limits of one Append, checked as its messages arrive, before the
// append is proposed.
const (
	maxAppendMessages = 1000     // Skald's limit of one append
	maxAppendBytes    = 16 << 20 // data and custom metadata in all
)

// The metadata keys of an event.
const (
	keyType        = "type"
	keyContentType = "content-type"
	keyCreated     = "created"
	contentJSON    = "application/json"
)

// expected is an Append's expected revision in Skald's terms.
type expected struct {
	version *int64 // nil: any
	exists  bool   // stream_exists: the stream must have a message
	wire    *streams.AppendResp_WrongExpectedVersion
}

// append serves Streams.Append: the options first, then the proposed
// messages, one Skald append once the client has sent them all. A wrong
// expected revision is answered in-band, as KurrentDB does; anything
// refused changes nothing.
func (s *Server) append(ctx context.Context, stream *connect.ClientStream[streams.AppendReq]) (
	*connect.Response[streams.AppendResp], error) {
	c, ok := callerFrom(ctx)
	if !ok {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("no caller admitted"))
	}
	if !stream.Receive() {
		return nil, received(stream.Err(), "the options of an Append")
	}
	opts := stream.Msg().GetOptions()
	if opts == nil {
		return nil, invalid("the first message of an Append must be its options, not a proposed message")
	}
	name := string(opts.GetStreamIdentifier().GetStreamName())
	exp, err := expectedOf(opts)
	if err != nil {
		return nil, err
	}
	// A refused event is answered once the client has sent them all:
	// the clients read no answer before that (see discard).
	var (
		msgs    []*skaldv1.NewMessage
		refused error
		count   int
		bytes   int
	)
	for stream.Receive() {
		p := stream.Msg().GetProposedMessage()
		count++
		bytes += len(p.GetData()) + len(p.GetCustomMetadata())
		switch {
		case count > maxAppendMessages:
			return nil, invalid("append to %q: at most %d events per append", name, maxAppendMessages)
		case bytes > maxAppendBytes:
			return nil, invalid("append to %q: data and metadata exceed %d bytes (16 MiB) per append", name, maxAppendBytes)
		case refused != nil:
			continue
		case p == nil:
			refused = invalid("append to %q: options may be sent only once, first", name)
			continue
		}
		m, err := newMessage(len(msgs), p)
		if err != nil {
			refused = invalid("append to %q: %v", name, err)
			continue
		}
		msgs = append(msgs, m)
	}
	if err := stream.Err(); err != nil {
		return nil, received(err, "the events of an Append")
	}
	if refused != nil {
		return nil, refused
	}
	if exp.exists || len(msgs) == 0 {
		current, err := s.version(ctx, c, name)
		if err != nil {
			return nil, err
		}
		if exp.exists && current < 0 {
			return wrongVersion(exp, current), nil
		}
		if len(msgs) == 0 {
			if exp.version != nil && *exp.version != current {
				return wrongVersion(exp, current), nil
			}
			return connect.NewResponse(success(current, nil)), nil
		}
	}
	res, err := s.local.Append(ctx, c, &skaldv1.AppendRequest{Stream: name, Messages: msgs, ExpectedVersion: exp.version})
	if err != nil {
		if conflict := conflictOf(err); conflict != nil {
			return wrongVersion(exp, conflict.GetActualVersion()), nil
		}
		if connect.CodeOf(err) == connect.CodeFailedPrecondition {
			// Skald refuses an append to a hard-deleted stream so, with no
			// detail: the stream says whether that was why.
			if _, verr := s.version(ctx, c, name); verr != nil && connect.CodeOf(verr) == connect.CodeFailedPrecondition {
				return nil, verr
			}
		}
		return nil, fromSkald(err, "append to %q", name)
	}
	pos := uint64(res.GetLastGlobalPosition())
	return connect.NewResponse(success(res.GetLastPosition(), &pos)), nil
}

// expectedOf reads an Append's expected revision.
func expectedOf(o *streams.AppendReq_Options) (expected, error) {
	wire := &streams.AppendResp_WrongExpectedVersion{}
	var e expected
	switch v := o.GetExpectedStreamRevision().(type) {
	case *streams.AppendReq_Options_Any:
		wire.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
		wire.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_Any_20_6_0{Any_20_6_0: &shared.Empty{}}
	case *streams.AppendReq_Options_NoStream:
		none := int64(-1)
		e.version = &none
		wire.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedNoStream{
			ExpectedNoStream: &shared.Empty{}}
	case *streams.AppendReq_Options_StreamExists:
		e.exists = true
		wire.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedStreamExists{
			ExpectedStreamExists: &shared.Empty{}}
		wire.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_StreamExists_20_6_0{
			StreamExists_20_6_0: &shared.Empty{}}
	case *streams.AppendReq_Options_Revision:
		if v.Revision > math.MaxInt64 {
			return e, invalid("expected revision %d is beyond any stream's", v.Revision)
		}
		r := int64(v.Revision)
		e.version = &r
		wire.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: v.Revision}
		wire.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision_20_6_0{
			ExpectedRevision_20_6_0: v.Revision}
	default:
		return e, invalid("the options of an Append must give an expected revision " +
			"(any, no_stream, stream_exists or a revision)")
	}
	e.wire = wire
	return e, nil
}

// newMessage converts proposed message i. Skald stores an event's data
// as a JSON object, so only application/json data passes (Skald's own
// validation then checks that it is an object); custom metadata is
// stored as the message's metadata and must be empty or a JSON object.
func newMessage(i int, p *streams.AppendReq_ProposedMessage) (*skaldv1.NewMessage, error) {
	id, err := idOf(p.GetId())
	if err != nil {
		return nil, fmt.Errorf("event %d: %w", i, err)
	}
	typ, ok := p.GetMetadata()[keyType]
	if !ok || typ == "" {
		return nil, fmt.Errorf("event %d: the metadata must give its type (%q)", i, keyType)
	}
	ct, ok := p.GetMetadata()[keyContentType]
	if !ok {
		return nil, fmt.Errorf("event %d (%s): the metadata must give its content type (%q)", i, typ, keyContentType)
	}
	if ct != contentJSON {
		return nil, fmt.Errorf("event %d (%s): content type %q is not stored: Skald stores an event's data as a JSON "+
			"object, send %s", i, typ, ct, contentJSON)
	}
	if !jsonObject(p.GetData()) {
		return nil, fmt.Errorf("event %d (%s): data must be a JSON object (Skald stores events as JSON objects)", i, typ)
	}
	meta := p.GetCustomMetadata()
	if len(meta) > 0 && !jsonObject(meta) {
		return nil, fmt.Errorf("event %d (%s): custom metadata must be empty or a JSON object", i, typ)
	}
	return &skaldv1.NewMessage{Id: id, Type: typ, Data: p.GetData(), Metadata: meta}, nil
}

// version is a stream's current revision, -1 when it has no message;
// a hard-deleted stream is KurrentDB's stream-deleted error.
func (s *Server) version(ctx context.Context, c rpc.Caller, name string) (int64, error) {
	v, err := s.local.StreamVersion(ctx, c, &skaldv1.StreamVersionRequest{Stream: name})
	if err != nil {
		return 0, fromSkald(err, "read the revision of %q", name)
	}
	if v.GetHardDeleted() {
		return 0, streamDeleted(name)
	}
	return v.GetVersion(), nil
}

// success is AppendResp.Success at revision current (-1: no stream)
// and global position pos (nil: none).
func success(current int64, pos *uint64) *streams.AppendResp {
	ok := &streams.AppendResp_Success{}
	if current < 0 {
		ok.CurrentRevisionOption = &streams.AppendResp_Success_NoStream{NoStream: &shared.Empty{}}
	} else {
		ok.CurrentRevisionOption = &streams.AppendResp_Success_CurrentRevision{CurrentRevision: uint64(current)}
	}
	if pos == nil {
		ok.PositionOption = &streams.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}}
	} else {
		ok.PositionOption = &streams.AppendResp_Success_Position{Position: &streams.AppendResp_Position{
			CommitPosition: *pos, PreparePosition: *pos}}
	}
	return &streams.AppendResp{Result: &streams.AppendResp_Success_{Success: ok}}
}

// wrongVersion answers an Append whose expected revision e the stream at
// revision current (-1: no stream) does not meet, in both the current
// and the 20.6.0 fields, as KurrentDB does.
func wrongVersion(e expected, current int64) *connect.Response[streams.AppendResp] {
	w := e.wire
	if current < 0 {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_NoStream_20_6_0{
			NoStream_20_6_0: &shared.Empty{}}
	} else {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: uint64(current)}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_CurrentRevision_20_6_0{
			CurrentRevision_20_6_0: uint64(current)}
	}
	return connect.NewResponse(&streams.AppendResp{
		Result: &streams.AppendResp_WrongExpectedVersion_{WrongExpectedVersion: w}})
}

// conflictOf is the version conflict Skald refused an append with, or
// nil.
func conflictOf(err error) *skaldv1.VersionConflict {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if c, ok := v.(*skaldv1.VersionConflict); ok {
				return c
			}
		}
	}
	return nil
}
