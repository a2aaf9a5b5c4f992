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
)

// deleteOptions are what Delete and Tombstone share: the stream and the
// expected revision (any, no_stream, stream_exists or a revision).
type deleteOptions struct {
	stream   string
	any      bool
	noStream bool
	exists   bool
	revision *uint64
}

// deleteStream serves Delete (soft: the stream keeps its revision, and
// a later append continues it) and Tombstone (hard: the stream accepts
// no more appends) on Skald's DeleteStream. Its position is the global
// position of the stream's last event when it was deleted: Skald writes
// no event for a delete, and KurrentDB's clients expect a position.
func (s *Server) deleteStream(ctx context.Context, o deleteOptions, hard bool) (uint64, error) {
	c, ok := callerFrom(ctx)
	if !ok {
		return 0, connect.NewError(connect.CodeUnauthenticated, errors.New("no caller admitted"))
	}
	current, err := s.version(ctx, c, o.stream)
	if err != nil {
		return 0, err
	}
	var expected *int64
	switch {
	case o.any:
	case o.noStream:
		none := int64(-1)
		expected = &none
	case o.exists:
		if current < 0 {
			return 0, deleteConflict(o, current)
		}
	case o.revision != nil:
		if *o.revision > math.MaxInt64 {
			return 0, invalid("expected revision %d is beyond any stream's", *o.revision)
		}
		r := int64(*o.revision)
		expected = &r
	default:
		return 0, invalid("the options of a delete must give an expected revision " +
			"(any, no_stream, stream_exists or a revision)")
	}
	if expected != nil && *expected != current {
		return 0, deleteConflict(o, current)
	}
	if current < 0 {
		return 0, connect.NewError(connect.CodeNotFound,
			errors.New("stream "+strconv.Quote(o.stream)+" has no event to delete"))
	}
	last, err := s.local.ReadStream(ctx, c, &skaldv1.ReadStreamRequest{
		Stream: o.stream, Position: -1, Limit: 1, Backward: true})
	if err != nil {
		return 0, fromSkald(err, "read the last event of %q", o.stream)
	}
	var pos uint64
	if msgs := last.GetMessages(); len(msgs) > 0 {
		pos = uint64(msgs[0].GetGlobalPosition())
	}
	// Skald checks an exact expected revision again as it deletes; any
	// and stream_exists were decided above.
	_, err = s.local.DeleteStream(ctx, c, &skaldv1.DeleteStreamRequest{
		Stream: o.stream, Hard: hard, ExpectedVersion: expected})
	if err != nil {
		if conflict := conflictOf(err); conflict != nil {
			return 0, deleteConflict(o, conflict.GetActualVersion())
		}
		return 0, fromSkald(err, "delete %q", o.stream)
	}
	return pos, nil
}

// deleteConflict is KurrentDB's wrong expected version of a delete:
// FailedPrecondition with the exception trailer and its companions,
// which the clients read without checking that they are there.
func deleteConflict(o deleteOptions, current int64) error {
	expected := "-2" // any, as KurrentDB numbers it
	switch {
	case o.noStream:
		expected = "-1"
	case o.exists:
		expected = "-4"
	case o.revision != nil:
		expected = strconv.FormatUint(*o.revision, 10)
	}
	err := connect.NewError(connect.CodeFailedPrecondition, errors.New("delete of "+strconv.Quote(o.stream)+
		": wrong expected version: expected "+expected+", the stream is at "+strconv.FormatInt(current, 10)))
	err.Meta().Set("exception", "wrong-expected-version")
	err.Meta().Set("stream-name", o.stream)
	err.Meta().Set("expected-version", expected)
	err.Meta().Set("actual-version", strconv.FormatInt(current, 10))
	return err
}

// remove serves Streams.Delete.
func (s *Server) remove(ctx context.Context, req *connect.Request[streams.DeleteReq]) (
	*connect.Response[streams.DeleteResp], error) {
	o := req.Msg.GetOptions()
	d := deleteOptions{stream: string(o.GetStreamIdentifier().GetStreamName()), any: o.GetAny() != nil,
		noStream: o.GetNoStream() != nil, exists: o.GetStreamExists() != nil}
	if r, ok := o.GetExpectedStreamRevision().(*streams.DeleteReq_Options_Revision); ok {
		d.revision = &r.Revision
	}
	pos, err := s.deleteStream(ctx, d, false)
	if err != nil {
		return nil, err
	}
	if pos == 0 {
		return connect.NewResponse(&streams.DeleteResp{
			PositionOption: &streams.DeleteResp_NoPosition{NoPosition: &shared.Empty{}}}), nil
	}
	return connect.NewResponse(&streams.DeleteResp{PositionOption: &streams.DeleteResp_Position_{
		Position: &streams.DeleteResp_Position{CommitPosition: pos, PreparePosition: pos}}}), nil
}

// tombstone serves Streams.Tombstone.
func (s *Server) tombstone(ctx context.Context, req *connect.Request[streams.TombstoneReq]) (
	*connect.Response[streams.TombstoneResp], error) {
	o := req.Msg.GetOptions()
	d := deleteOptions{stream: string(o.GetStreamIdentifier().GetStreamName()), any: o.GetAny() != nil,
		noStream: o.GetNoStream() != nil, exists: o.GetStreamExists() != nil}
	if r, ok := o.GetExpectedStreamRevision().(*streams.TombstoneReq_Options_Revision); ok {
		d.revision = &r.Revision
	}
	pos, err := s.deleteStream(ctx, d, true)
	if err != nil {
		return nil, err
	}
	if pos == 0 {
		return connect.NewResponse(&streams.TombstoneResp{
			PositionOption: &streams.TombstoneResp_NoPosition{NoPosition: &shared.Empty{}}}), nil
	}
	return connect.NewResponse(&streams.TombstoneResp{PositionOption: &streams.TombstoneResp_Position_{
		Position: &streams.TombstoneResp_Position{CommitPosition: pos, PreparePosition: pos}}}), nil
}
