package rpc

import (
	"context"

	"connectrpc.com/connect"

	fsmv1 "github.com/skalddb/skald/rpc/gen/skald/fsm/v1"
	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

// DeleteStream removes every message of a stream of the caller's
// namespace; a hard delete also leaves a tombstone that refuses writes.
func (s *eventStore) DeleteStream(ctx context.Context, req *connect.Request[skaldv1.DeleteStreamRequest]) (*connect.Response[skaldv1.DeleteStreamResponse], error) {
	m := req.Msg
	if err := checkStream("stream", m.Stream); err != nil {
		return nil, err
	}
	if m.ExpectedVersion != nil && *m.ExpectedVersion < -1 {
		return nil, invalidField("expected_version", "must be -1 (no stream) or more, got %d", *m.ExpectedVersion)
	}
	res, err := s.b.DeleteStream(ctx, &fsmv1.DeleteStream{
		Namespace: callerFrom(ctx).namespace, Stream: m.Stream, Hard: m.Hard, ExpectedVersion: m.ExpectedVersion,
	})
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return connect.NewResponse(&skaldv1.DeleteStreamResponse{MessagesDeleted: res.MessagesDeleted, Version: res.Version, Index: res.Index}), nil
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
	return connect.NewResponse(&skaldv1.TruncateStreamResponse{MessagesDeleted: res.MessagesDeleted, Version: res.Version, Index: res.Index}), nil
}
