package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// events is what the EventStore handlers need from the node.
type events interface {
	Append(ctx context.Context, a *fsmv1.Append) (*fsmv1.Result, error)
	AppendMulti(ctx context.Context, a *fsmv1.AppendMulti) (*fsmv1.Result, error)
	Import(ctx context.Context, i *fsmv1.Import) (*fsmv1.Result, error)
	TruncateStream(ctx context.Context, c *fsmv1.TruncateStream) (*fsmv1.Result, error)
	DeleteStream(ctx context.Context, c *fsmv1.DeleteStream) (*fsmv1.Result, error)
	DeleteByWatermark(ctx context.Context, c *fsmv1.DeleteByWatermark) (*fsmv1.Result, error)
	Read(ctx context.Context, ns string, opts nodeapi.ReadOptions, fn func(*fsm.View) error) (uint64, error)
	ReadBarrier(ctx context.Context, opts nodeapi.ReadOptions) error
	AppliedIndex() uint64
	Feed() *nodeapi.Feed
}

// eventStore implements skald.v1.EventStore for the caller's namespace.
type eventStore struct {
	b         events
	log       *slog.Logger
	sub       subscribeConfig
	pageBytes int // caps every read's page (Limits.PageBytes)
	// scanBudget bounds what one read examines and skips (Limits.ScanBudget).
	scanBudget int
	// replyTimeout ends a read when its reply could no longer be written
	// (Limits.WriteTimeout).
	replyTimeout time.Duration
	// streamInFlight caps the requests in flight on one AppendStream
	// (Limits.AppendStreamInFlight).
	streamInFlight int
	// metrics counts each request of an AppendStream; hint names the
	// leader in its errors when this node is a follower.
	metrics *rpcMetrics
	hint    leaderHint
	// creds checks an AppendStream's credential at each request, so a
	// revoke that returned refuses the next request at once, as for a
	// unary call (nil in tests of the handler alone).
	creds tokenChecker
}

func (s *eventStore) Append(ctx context.Context, req *connect.Request[skaldv1.AppendRequest]) (*connect.Response[skaldv1.AppendResponse], error) {
	resp, err := s.append(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// append is one Append, unary or streamed (appendstream.go): checked at
// the edge, proposed, answered.
func (s *eventStore) append(ctx context.Context, m *skaldv1.AppendRequest) (*skaldv1.AppendResponse, error) {
	if err := checkKnown(m); err != nil {
		return nil, err
	}
	a := &fsmv1.Append{Namespace: callerFrom(ctx).namespace, Stream: m.Stream, ExpectedVersion: m.ExpectedVersion,
		Messages: newMessages(m.Messages), Condition: conditionOf(m.Condition)}
	if err := asInvalid(fsm.ValidateAppend(a)); err != nil {
		return nil, err
	}
	if err := checkEdgeMessages("messages", m.Messages, a.Messages); err != nil {
		return nil, err
	}
	res, err := s.b.Append(ctx, a)
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	return &skaldv1.AppendResponse{
		FirstPosition: res.GetAppend().FirstPosition, LastPosition: res.GetAppend().LastPosition,
		FirstGlobalPosition: res.GetAppend().FirstGlobalPosition, LastGlobalPosition: res.GetAppend().LastGlobalPosition, Index: res.Index,
		Duplicate: res.GetAppend().Duplicate,
	}, nil
}

func (s *eventStore) AppendMulti(ctx context.Context, req *connect.Request[skaldv1.AppendMultiRequest]) (*connect.Response[skaldv1.AppendMultiResponse], error) {
	cmd, err := appendMultiCommand(callerFrom(ctx).namespace, req.Msg)
	if err != nil {
		return nil, err
	}
	res, err := s.b.AppendMulti(ctx, cmd)
	if err != nil {
		return nil, s.toConnect(ctx, err)
	}
	out := &skaldv1.AppendMultiResponse{FirstGlobalPosition: res.GetAppendMulti().FirstGlobalPosition, LastGlobalPosition: res.GetAppendMulti().LastGlobalPosition,
		Index: res.Index, Duplicate: res.GetAppendMulti().Duplicate}
	for _, r := range res.GetAppendMulti().Streams {
		out.Streams = append(out.Streams, &skaldv1.StreamAppendResult{Stream: r.Stream, FirstPosition: r.FirstPosition, LastPosition: r.LastPosition,
			FirstGlobalPosition: r.FirstGlobalPosition, LastGlobalPosition: r.LastGlobalPosition})
	}
	return connect.NewResponse(out), nil
}

// appendMultiCommand converts an AppendMulti request and checks it: fsm's
// rules (fsm.ValidateAppendMulti: fsm.MaxMultiStreams streams, each once;
// fsm.MaxAppendMessages messages and fsm.MaxMultiBytes of data and
// metadata in all), then the API's own (checkEdgeMessages).
func appendMultiCommand(ns string, m *skaldv1.AppendMultiRequest) (*fsmv1.AppendMulti, error) {
	if err := checkKnown(m); err != nil {
		return nil, err
	}
	cmd := &fsmv1.AppendMulti{Namespace: ns, Streams: make([]*fsmv1.StreamAppend, len(m.Streams)),
		Condition: conditionOf(m.Condition)}
	for i, s := range m.Streams {
		cmd.Streams[i] = &fsmv1.StreamAppend{Stream: s.Stream, ExpectedVersion: s.ExpectedVersion,
			Messages: newMessages(s.Messages)}
	}
	if err := asInvalid(fsm.ValidateAppendMulti(cmd)); err != nil {
		return nil, err
	}
	for i, s := range m.Streams {
		if err := checkEdgeMessages(fmt.Sprintf("streams[%d].messages", i), s.Messages, cmd.Streams[i].Messages); err != nil {
			return nil, err
		}
	}
	return cmd, nil
}

// Query reads the messages matching a query (fsm/query.go) above a global
// position, at the requested consistency.
func (s *eventStore) Query(ctx context.Context, req *connect.Request[skaldv1.QueryRequest]) (*connect.Response[skaldv1.QueryResponse], error) {
	m := req.Msg
	if err := checkKnown(m); err != nil {
		return nil, err
	}
	q, err := queryOf("query", m.Query)
	if err != nil {
		return nil, err
	}
	if err := nonNegative("after", m.After); err != nil {
		return nil, err
	}
	limit, err := readLimit(m.Limit)
	if err != nil {
		return nil, err
	}
	var (
		out []fsm.Message
		end pageEnd
	)
	applied, err := s.read(ctx, m.Read, func(v *fsm.View) (err error) {
		out, err = v.Query(fsm.QueryOf(q), m.After, limit)
		end = endOf(v, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&skaldv1.QueryResponse{Messages: messages(out), AppliedIndex: applied, Truncated: end.truncated, ResumeFrom: end.resume}), nil
}

// read runs fn on a view of the caller's namespace at the requested
// consistency, its pages capped at s.pageBytes and s.scanBudget. The read
// ends with the request's context, or once its reply could no longer be
// written in time.
func (s *eventStore) read(ctx context.Context, o *skaldv1.ReadOptions, fn func(*fsm.View) error) (uint64, error) {
	opts, err := readOptions(o)
	if err != nil {
		return 0, err
	}
	if s.replyTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.replyTimeout)
		defer cancel()
	}
	hold := holdFrom(ctx)
	applied, err := s.b.Read(ctx, callerFrom(ctx).namespace, opts, func(v *fsm.View) error {
		// Once the read may start (past its barrier), not while it waits.
		if err := hold.reserve(ctx, s.pageBytes+replyOverhead); err != nil {
			return err
		}
		v.SetPageBytes(s.pageBytes)
		v.SetScanBudget(s.scanBudget)
		err := fn(v)
		hold.keep(v.LastPageBytes() + replyOverhead)
		return err
	})
	return applied, s.toConnect(ctx, err)
}

// pageEnd is how a read's page ended, as its reply says it: truncated
// (more may follow) and, after a stop at the scan budget, where to read
// on.
type pageEnd struct {
	truncated bool
	resume    *int64
}

// endOf reads how v's last read ended. lowest is the smallest position a
// read may go on from (a backward read that would resume below it has
// examined everything: it ended).
func endOf(v *fsm.View, lowest int64) pageEnd {
	resume, stopped := v.ScanStopped()
	if !stopped {
		return pageEnd{truncated: v.PageCapped()}
	}
	if resume < lowest {
		return pageEnd{}
	}
	return pageEnd{truncated: true, resume: &resume}
}

// toConnect maps errors of calls on the caller's own namespace: that it
// does not exist means the token's namespace was deleted (a node can pass
// the token before it applied the delete), which is Unauthenticated.
func (s *eventStore) toConnect(ctx context.Context, err error) error {
	return toConnect(ctx, s.log, ownNamespace(ctx, err))
}

func (s *eventStore) ReadStream(ctx context.Context, req *connect.Request[skaldv1.ReadStreamRequest]) (*connect.Response[skaldv1.ReadStreamResponse], error) {
	m := req.Msg
	if err := checkStream("stream", m.Stream); err != nil {
		return nil, err
	}
	limit, err := readLimit(m.Limit)
	if err != nil {
		return nil, err
	}
	if err := readFrom("position", m.Position, m.Backward); err != nil {
		return nil, err
	}
	if err := nonNegative("global_position", m.GetGlobalPosition()); err != nil {
		return nil, err
	}
	var (
		out []fsm.Message
		end pageEnd
	)
	applied, err := s.read(ctx, m.Read, func(v *fsm.View) (err error) {
		out, err = v.ReadStream(fsm.StreamQuery{Stream: m.Stream, Position: m.Position, GlobalPosition: m.GetGlobalPosition(), Limit: limit, Backward: m.Backward})
		end = endOf(v, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&skaldv1.ReadStreamResponse{Messages: messages(out), AppliedIndex: applied, Truncated: end.truncated, ResumeFrom: end.resume}), nil
}

func (s *eventStore) ReadCategory(ctx context.Context, req *connect.Request[skaldv1.ReadCategoryRequest]) (*connect.Response[skaldv1.ReadCategoryResponse], error) {
	m := req.Msg
	if err := checkCategory("category", m.Category); err != nil {
		return nil, err
	}
	limit, err := readLimit(m.Limit)
	if err != nil {
		return nil, err
	}
	if err := readFrom("global_position", m.GlobalPosition, m.Backward); err != nil {
		return nil, err
	}
	member, size, err := categoryFilters(m.Correlation, m.ConsumerGroup)
	if err != nil {
		return nil, err
	}
	filter := fsm.Filter{Types: m.Types, StreamPrefix: m.StreamPrefix}
	if err := asInvalid(fsm.ValidateFilter("", filter)); err != nil {
		return nil, err
	}
	if err := asInvalid(fsm.ValidateStateVector("state_vector", m.Category, m.StateVector)); err != nil {
		return nil, err
	}
	var after map[string]int64
	if len(m.StateVector) > 0 {
		after = m.StateVector
	}
	var (
		out []fsm.Message
		end pageEnd
	)
	applied, err := s.read(ctx, m.Read, func(v *fsm.View) (err error) {
		out, err = v.ReadCategory(fsm.CategoryQuery{
			Category: m.Category, GlobalPosition: m.GlobalPosition, Limit: limit,
			Correlation: m.Correlation, Member: member, Size: size, Backward: m.Backward, Filter: filter,
			After: after,
		})
		end = endOf(v, 1)
		return err
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&skaldv1.ReadCategoryResponse{Messages: messages(out), AppliedIndex: applied, Truncated: end.truncated, ResumeFrom: end.resume}), nil
}

func (s *eventStore) ReadAll(ctx context.Context, req *connect.Request[skaldv1.ReadAllRequest]) (*connect.Response[skaldv1.ReadAllResponse], error) {
	m := req.Msg
	limit, err := readLimit(m.Limit)
	if err != nil {
		return nil, err
	}
	if err := readFrom("global_position", m.GlobalPosition, m.Backward); err != nil {
		return nil, err
	}
	filter := fsm.Filter{Types: m.Types, StreamPrefix: m.StreamPrefix}
	if err := asInvalid(fsm.ValidateFilter("", filter)); err != nil {
		return nil, err
	}
	var (
		out []fsm.Message
		end pageEnd
	)
	applied, err := s.read(ctx, m.Read, func(v *fsm.View) (err error) {
		out, err = v.ReadAllQuery(fsm.AllQuery{GlobalPosition: m.GlobalPosition, Limit: limit, Backward: m.Backward, Filter: filter})
		end = endOf(v, 1)
		return err
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&skaldv1.ReadAllResponse{Messages: messages(out), AppliedIndex: applied, Truncated: end.truncated, ResumeFrom: end.resume}), nil
}

func (s *eventStore) LastMessage(ctx context.Context, req *connect.Request[skaldv1.LastMessageRequest]) (*connect.Response[skaldv1.LastMessageResponse], error) {
	m := req.Msg
	if err := checkStream("stream", m.Stream); err != nil {
		return nil, err
	}
	if m.Type != "" {
		if err := asInvalid(fsm.ValidateTypeName("type", m.Type)); err != nil {
			return nil, err
		}
	}
	var (
		msg   fsm.Message
		found bool
	)
	applied, err := s.read(ctx, m.Read, func(v *fsm.View) (err error) {
		msg, found, err = v.LastMessage(m.Stream, m.Type)
		return err
	})
	if err != nil {
		return nil, err
	}
	resp := &skaldv1.LastMessageResponse{AppliedIndex: applied}
	if found {
		resp.Message = message(&msg)
	}
	return connect.NewResponse(resp), nil
}

func (s *eventStore) StreamVersion(ctx context.Context, req *connect.Request[skaldv1.StreamVersionRequest]) (*connect.Response[skaldv1.StreamVersionResponse], error) {
	m := req.Msg
	if err := checkStream("stream", m.Stream); err != nil {
		return nil, err
	}
	var (
		version int64
		hard    bool
	)
	applied, err := s.read(ctx, m.Read, func(v *fsm.View) (err error) {
		if version, err = v.StreamVersion(m.Stream); err != nil {
			return err
		}
		hard, err = v.StreamHardDeleted(m.Stream)
		return err
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&skaldv1.StreamVersionResponse{Version: version, AppliedIndex: applied, HardDeleted: hard}), nil
}

func (s *eventStore) ListStreams(ctx context.Context, req *connect.Request[skaldv1.ListStreamsRequest]) (*connect.Response[skaldv1.ListStreamsResponse], error) {
	m := req.Msg
	if m.Limit < 0 || m.Limit > fsm.MaxStreamsPage {
		return nil, invalidField("limit", "must be 0 (default %d) or 1..%d, got %d", fsm.DefaultStreamsPage, fsm.MaxStreamsPage, m.Limit)
	}
	var (
		streams []fsm.StreamInfo
		next    string
	)
	applied, err := s.read(ctx, m.Read, func(v *fsm.View) (err error) {
		streams, next, err = v.ListStreams(fsm.StreamsQuery{Prefix: m.Prefix, Cursor: m.Cursor, Limit: int(m.Limit)})
		return err
	})
	if err != nil {
		return nil, err
	}
	resp := &skaldv1.ListStreamsResponse{NextCursor: next, AppliedIndex: applied}
	for _, st := range streams {
		resp.Streams = append(resp.Streams, &skaldv1.StreamInfo{Stream: st.Stream, Version: st.Version, LastActivity: timestamp(st.LastActivity)})
	}
	return connect.NewResponse(resp), nil
}

func (s *eventStore) ListCategories(ctx context.Context, req *connect.Request[skaldv1.ListCategoriesRequest]) (*connect.Response[skaldv1.ListCategoriesResponse], error) {
	m := req.Msg
	if m.Limit < 0 || m.Limit > fsm.MaxCategoriesPage {
		return nil, invalidField("limit", "must be 0 (default %d) or 1..%d, got %d", fsm.MaxCategoriesPage, fsm.MaxCategoriesPage, m.Limit)
	}
	var (
		cats []fsm.CategoryInfo
		next string
	)
	applied, err := s.read(ctx, m.Read, func(v *fsm.View) (err error) {
		cats, next, err = v.ListCategories(fsm.CategoriesQuery{Cursor: m.Cursor, Limit: int(m.Limit)})
		return err
	})
	if err != nil {
		return nil, err
	}
	resp := &skaldv1.ListCategoriesResponse{AppliedIndex: applied, NextCursor: next}
	for _, c := range cats {
		resp.Categories = append(resp.Categories, &skaldv1.CategoryInfo{Category: c.Category, StreamCount: c.StreamCount, MessageCount: c.MessageCount})
	}
	return connect.NewResponse(resp), nil
}
