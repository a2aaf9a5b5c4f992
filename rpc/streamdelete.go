package rpc

import (
	"context"
	"maps"
	"slices"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// DeleteStream removes every message of a stream of the caller's
// namespace; a hard delete also leaves a tombstone that refuses writes.
func (s *eventStore) DeleteStream(ctx context.Context, req *connect.Request[skaldv1.DeleteStreamRequest]) (*connect.Response[skaldv1.DeleteStreamResponse], error) {
	m := req.Msg
	if err := checkStream("stream", m.Stream); err != nil {
		return nil, err
	}
	if err := asInvalid(fsm.ValidateExpectedVersion("expected_version", m.ExpectedVersion)); err != nil {
		return nil, err
	}
	res, err := s.b.DeleteStream(ctx, &fsmv1.DeleteStream{
		Namespace: callerFrom(ctx).namespace, Stream: m.Stream, Hard: m.Hard, ExpectedVersion: m.ExpectedVersion,
	})
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return connect.NewResponse(&skaldv1.DeleteStreamResponse{MessagesDeleted: res.GetStreamDeletion().MessagesDeleted, Version: res.GetStreamDeletion().Version, Index: res.Index}), nil
}

// TruncateStream removes the messages of a stream below a position.
func (s *eventStore) TruncateStream(ctx context.Context, req *connect.Request[skaldv1.TruncateStreamRequest]) (*connect.Response[skaldv1.TruncateStreamResponse], error) {
	m := req.Msg
	if err := checkStream("stream", m.Stream); err != nil {
		return nil, err
	}
	if m.Before < 0 {
		return nil, invalidField("before", "must be 0 or more, got %d", m.Before)
	}
	res, err := s.b.TruncateStream(ctx, &fsmv1.TruncateStream{Namespace: callerFrom(ctx).namespace, Stream: m.Stream, Before: m.Before})
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return connect.NewResponse(&skaldv1.TruncateStreamResponse{MessagesDeleted: res.GetStreamDeletion().MessagesDeleted, Version: res.GetStreamDeletion().Version, Index: res.Index}), nil
}

// DeleteByWatermark removes, in one category, each stream's messages up to
// its watermark (or only those of the given types).
func (s *eventStore) DeleteByWatermark(ctx context.Context, req *connect.Request[skaldv1.DeleteByWatermarkRequest]) (*connect.Response[skaldv1.DeleteByWatermarkResponse], error) {
	m := req.Msg
	if err := checkCategory("category", m.Category); err != nil {
		return nil, err
	}
	c, err := watermarkCommand(callerFrom(ctx).namespace, m.Category, m.Watermarks, m.Types)
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	res, err := s.b.DeleteByWatermark(ctx, c)
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return connect.NewResponse(&skaldv1.DeleteByWatermarkResponse{MessagesDeleted: res.GetWatermarkDeletion().MessagesDeleted, Streams: res.GetWatermarkDeletion().Streams, Index: res.Index}), nil
}

// watermarkCommand lists the watermarks in byte order of the stream names,
// as apply requires (a map has no order), checking them as apply will: a
// refusal is an *fsm.ValidationError, for errorTable.
func watermarkCommand(namespace, category string, marks map[string]int64, types []string) (*fsmv1.DeleteByWatermark, error) {
	c := &fsmv1.DeleteByWatermark{Namespace: namespace, Category: category, Types: types}
	for _, stream := range slices.Sorted(maps.Keys(marks)) {
		c.Watermarks = append(c.Watermarks, &fsmv1.StreamWatermark{Stream: stream, Position: marks[stream]})
	}
	if err := fsm.ValidateWatermarks(c); err != nil {
		return nil, err
	}
	return c, nil
}
