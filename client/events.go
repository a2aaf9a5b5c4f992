package client

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// AppendOption changes one append.
type AppendOption func(*appendSettings)

type appendSettings struct {
	expectedVersion *int64
	condition       *skaldv1.AppendCondition
}

// ExpectVersion makes an append fail with ErrWrongExpectedVersion unless
// the stream is at version v (its last position; -1: no message yet).
func ExpectVersion(v int64) AppendOption {
	return func(s *appendSettings) { s.expectedVersion = &v }
}

// FailIfMatch makes an append (or AppendMulti) conditional, as the
// Dynamic Consistency Boundary pattern has it: it fails with
// ErrConditionFailed when a message matching q exists with a global
// position above after (0: any). The server decides when it applies the
// append, against every write ordered before it: of two appends whose
// conditions match each other's messages, at most one succeeds. Read
// with Query first and pass the last global position read (or the head
// the read saw) as after. A retried try of a written conditional append
// is answered as a duplicate, not as a failed condition.
func FailIfMatch(q Query, after int64) AppendOption {
	return func(s *appendSettings) {
		s.condition = &skaldv1.AppendCondition{FailIfEventsMatch: q.wire(), After: after}
	}
}

// Append writes msgs (1..1000) to stream, all or nothing, on the leader.
// Messages without an ID get one (a UUIDv7) before the first try. The
// write's index joins the client's session, so its session reads see it
// on every member.
//
// A try whose outcome is unknown (the answer was lost) is sent again with
// the same ids: the server recognises them and answers the original
// positions (AppendResult.Duplicate), so the messages land once. That
// holds within the namespace's dedupe window (2 minutes by default): the
// client retries for at most half of it after the first try, and not at
// all when the namespace does not remember ids. It holds too when a
// removal (TruncateStream, DeleteStream, DeleteByWatermark) took the
// original messages before the retry arrived: the server still knows
// their ids and positions, and the retry is answered as a duplicate.
//
// Errors: ErrWrongExpectedVersion (*WrongExpectedVersionError),
// ErrConditionFailed (*ConditionFailedError), ErrInvalidArgument, ErrResourceExhausted, ErrUnauthenticated,
// ErrStreamDeleted (the stream was hard-deleted): nothing was written.
// ErrAlreadyExists: a message id was already written with
// other content (or only some of the ids were); nothing was written.
// ErrUnavailable: no member took the write within ctx; nothing was
// written. ErrUnknownOutcome: it may have been written.
func (c *Client) Append(ctx context.Context, stream string, msgs []NewMessage, opts ...AppendOption) (AppendResult, error) {
	req := &skaldv1.AppendRequest{Stream: stream, Messages: make([]*skaldv1.NewMessage, len(msgs))}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		if m.ID == "" {
			id, err := uuid.NewV7()
			if err != nil {
				return AppendResult{}, err
			}
			m.ID = id.String()
		}
		ids[i] = m.ID
		req.Messages[i] = &skaldv1.NewMessage{Id: m.ID, Type: m.Type, Data: m.Data, Metadata: m.Metadata, Tags: m.Tags}
	}
	var set appendSettings
	for _, o := range opts {
		o(&set)
	}
	req.ExpectedVersion, req.Condition = set.expectedVersion, set.condition
	var resp *skaldv1.AppendResponse
	err := c.write(ctx, c.retryWindow, func(ctx context.Context, m *member) error {
		r, err := c.appendOn(ctx, m, req)
		if !errors.Is(err, errNoStream) {
			resp = r
			return err
		}
		r2, err := m.events.Append(ctx, connect.NewRequest(req))
		if err == nil {
			resp = r2.Msg
		}
		return err
	})
	if err != nil {
		return AppendResult{}, streamWriteError(err)
	}
	c.observe(resp.Index)
	return AppendResult{
		FirstPosition: resp.FirstPosition, LastPosition: resp.LastPosition,
		FirstGlobalPosition: resp.FirstGlobalPosition, LastGlobalPosition: resp.LastGlobalPosition,
		Index: resp.Index, IDs: ids, Duplicate: resp.Duplicate,
	}, nil
}

// AppendMulti writes to several streams at once, all or nothing, on the
// leader: one log entry, contiguous global positions in the order of
// parts. Messages without an ID get one before the first try; like
// Append, a try whose outcome is unknown is sent again with the same ids.
//
// Errors: ErrWrongExpectedVersion (*WrongExpectedVersionsError, naming
// every stream whose version did not match), ErrInvalidArgument (limits:
// 1..100 streams, each once, 1..1000 messages and 8 MiB in all),
// ErrAlreadyExists, ErrUnauthenticated, ErrStreamDeleted,
// ErrConditionFailed: nothing was written. ErrUnavailable: nothing was
// written. ErrUnknownOutcome: it may have been. Of the options only
// FailIfMatch applies (each part has its own ExpectedVersion).
func (c *Client) AppendMulti(ctx context.Context, parts []StreamAppend, opts ...AppendOption) (AppendMultiResult, error) {
	var set appendSettings
	for _, o := range opts {
		o(&set)
	}
	if set.expectedVersion != nil {
		return AppendMultiResult{}, &Error{Kind: ErrInvalidArgument, Err: errors.New("ExpectVersion does not apply to AppendMulti: set StreamAppend.ExpectedVersion")}
	}
	req := &skaldv1.AppendMultiRequest{Streams: make([]*skaldv1.StreamAppend, len(parts)), Condition: set.condition}
	ids := make([][]string, len(parts))
	for i, p := range parts {
		sa := &skaldv1.StreamAppend{Stream: p.Stream, ExpectedVersion: p.ExpectedVersion, Messages: make([]*skaldv1.NewMessage, len(p.Messages))}
		ids[i] = make([]string, len(p.Messages))
		for j, m := range p.Messages {
			if m.ID == "" {
				id, err := uuid.NewV7()
				if err != nil {
					return AppendMultiResult{}, err
				}
				m.ID = id.String()
			}
			ids[i][j] = m.ID
			sa.Messages[j] = &skaldv1.NewMessage{Id: m.ID, Type: m.Type, Data: m.Data, Metadata: m.Metadata, Tags: m.Tags}
		}
		req.Streams[i] = sa
	}
	var resp *skaldv1.AppendMultiResponse
	err := c.write(ctx, c.retryWindow, func(ctx context.Context, m *member) error {
		r, err := m.events.AppendMulti(ctx, connect.NewRequest(req))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	if err != nil {
		return AppendMultiResult{}, streamWriteError(err)
	}
	c.observe(resp.Index)
	out := AppendMultiResult{FirstGlobalPosition: resp.FirstGlobalPosition, LastGlobalPosition: resp.LastGlobalPosition,
		Index: resp.Index, Duplicate: resp.Duplicate, Streams: make([]StreamResult, len(resp.Streams))}
	for i, r := range resp.Streams {
		out.Streams[i] = StreamResult{Stream: r.Stream, FirstPosition: r.FirstPosition, LastPosition: r.LastPosition,
			FirstGlobalPosition: r.FirstGlobalPosition, LastGlobalPosition: r.LastGlobalPosition}
		if i < len(ids) {
			out.Streams[i].IDs = ids[i]
		}
	}
	return out, nil
}

func (c *Client) settings(opts []ReadOption) readSettings {
	s := readSettings{consistency: c.cfg.Consistency}
	for _, o := range opts {
		o(&s)
	}
	return s
}

// StreamQuery selects messages of one stream.
type StreamQuery struct {
	Stream string
	// Position is the first stream position to return.
	Position int64
	// MinGlobalPosition, when above 0, also skips messages below this
	// global position.
	MinGlobalPosition int64
	// Limit: 0 means 1000, -1 no limit, at most 10000.
	Limit int64
	// Backward reads newest first from Position down; Position -1 starts
	// at the last message, so Limit N returns the last N.
	Backward bool
}

// ReadStream returns the messages of q.Stream from q.Position on (down,
// with q.Backward). A reply the server cut at its page byte cap is read
// on (readPages): the result holds q.Limit messages, or all with -1,
// whatever their size.
func (c *Client) ReadStream(ctx context.Context, q StreamQuery, opts ...ReadOption) ([]Message, error) {
	s := c.settings(opts)
	return c.readPages(ctx, q.Limit, func(ctx context.Context, m *member, limit int64, last *Message, resume *int64) (page, error) {
		req := &skaldv1.ReadStreamRequest{Stream: q.Stream, Position: q.Position, Limit: limit, Read: s.wire(c.session.Load()), Backward: q.Backward}
		switch {
		case resume != nil:
			req.Position = *resume
		case last == nil:
		case q.Backward && last.Position == 0:
			return page{}, nil // nothing below
		case q.Backward:
			req.Position = last.Position - 1
		default:
			req.Position = last.Position + 1
		}
		if q.MinGlobalPosition > 0 {
			req.GlobalPosition = &q.MinGlobalPosition
		}
		r, err := m.events.ReadStream(ctx, connect.NewRequest(req))
		if err != nil {
			return page{}, err
		}
		c.observe(r.Msg.AppliedIndex)
		return page{fromWireAll(r.Msg.Messages), r.Msg.Truncated, r.Msg.ResumeFrom}, nil
	})
}

// defaultReadLimit is the server's page when a read's limit is 0.
const defaultReadLimit = 1000

// page is one reply of a paged read: its messages, whether the server
// cut it short (truncated), and where to read on when it stopped at its
// scan budget (resume_from; nil otherwise).
type page struct {
	msgs   []Message
	cut    bool
	resume *int64
}

// readPages gathers the pages of one read: read reads up to limit
// messages from the read's start, after last, or from resume (the
// server's resume_from, which wins). Pages are read until limit messages
// are gathered (0: 1000; negative: no limit) or a page was not cut. Each
// page is its own call (its own view of the data, at the read's
// consistency); a read in position order loses or repeats nothing by
// going on from the last message, or from where the server says it
// stopped examining (a page that stopped at the server's scan budget may
// be empty and still be followed by more).
func (c *Client) readPages(ctx context.Context, limit int64, read func(ctx context.Context, m *member, limit int64, last *Message, resume *int64) (page, error)) ([]Message, error) {
	if limit == 0 {
		limit = defaultReadLimit
	}
	var (
		out    []Message
		last   *Message
		resume *int64
	)
	for {
		var p page
		err := c.read(ctx, func(ctx context.Context, m *member) (err error) {
			p, err = read(ctx, m, limit, last, resume)
			return err
		})
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = p.msgs
		} else {
			out = append(out, p.msgs...)
		}
		if !p.cut || len(p.msgs) == 0 && p.resume == nil {
			return out, nil
		}
		if limit > 0 {
			if limit -= int64(len(p.msgs)); limit <= 0 {
				return out, nil
			}
		}
		if resume = p.resume; len(out) > 0 {
			last = &out[len(out)-1]
		}
	}
}

// CategoryQuery selects messages of one category.
type CategoryQuery struct {
	Category string
	// GlobalPosition is the first global position to return (0 means 1).
	GlobalPosition int64
	// Limit: 0 means 1000, -1 no limit, at most 10000.
	Limit int64
	// Correlation, when set, keeps messages whose
	// metadata.correlationStreamName is of this category.
	Correlation string
	// Group, when set, keeps the streams of one consumer group member.
	Group ConsumerGroup
	// Backward reads newest first from GlobalPosition down; -1 starts at
	// the last message, so Limit N returns the last N.
	Backward bool
	// Types, when set, keeps messages of these types (at most 32).
	Types []string
	// StreamPrefix, when set, keeps messages of streams whose name starts
	// with it.
	StreamPrefix string
	// StateVector, when set, is what the caller holds: per stream of the
	// category, its highest position. Messages of a stream named are
	// returned only above it; every message of the other streams is.
	StateVector map[string]int64
}

// ReadCategory returns the messages of q.Category in global order, or
// newest first with q.Backward (read on past the server's page byte cap,
// as ReadStream).
func (c *Client) ReadCategory(ctx context.Context, q CategoryQuery, opts ...ReadOption) ([]Message, error) {
	s := c.settings(opts)
	return c.readPages(ctx, q.Limit, func(ctx context.Context, m *member, limit int64, last *Message, resume *int64) (page, error) {
		from, ok := nextGlobal(q.GlobalPosition, q.Backward, last, resume)
		if !ok {
			return page{}, nil
		}
		r, err := m.events.ReadCategory(ctx, connect.NewRequest(&skaldv1.ReadCategoryRequest{
			Category: q.Category, GlobalPosition: from, Limit: limit, Correlation: q.Correlation,
			ConsumerGroup: q.Group.wire(), Read: s.wire(c.session.Load()), Backward: q.Backward,
			Types: q.Types, StreamPrefix: q.StreamPrefix, StateVector: q.StateVector,
		}))
		if err != nil {
			return page{}, err
		}
		c.observe(r.Msg.AppliedIndex)
		return page{fromWireAll(r.Msg.Messages), r.Msg.Truncated, r.Msg.ResumeFrom}, nil
	})
}

// ReadAll returns the namespace's messages from globalPosition (0 means 1)
// in global order; limit 0 means 1000, -1 no limit, at most 10000 (read
// on past the server's page byte cap, as ReadStream).
func (c *Client) ReadAll(ctx context.Context, globalPosition, limit int64, opts ...ReadOption) ([]Message, error) {
	return c.ReadAllQuery(ctx, AllQuery{GlobalPosition: globalPosition, Limit: limit}, opts...)
}

// ReadAllBackward returns the namespace's messages newest first from
// globalPosition down (-1: from the last message, so limit N returns the
// last N); limit as ReadAll.
func (c *Client) ReadAllBackward(ctx context.Context, globalPosition, limit int64, opts ...ReadOption) ([]Message, error) {
	return c.ReadAllQuery(ctx, AllQuery{GlobalPosition: globalPosition, Limit: limit, Backward: true}, opts...)
}

// AllQuery selects messages of the whole namespace.
type AllQuery struct {
	// GlobalPosition is the first global position to return (0 means 1);
	// backward, the highest (-1: from the last message).
	GlobalPosition int64
	// Limit: 0 means 1000, -1 no limit, at most 10000.
	Limit int64
	// Backward reads newest first.
	Backward bool
	// Types, when set, keeps messages of these types (at most 32); a
	// forward read of types costs in proportion to the matches.
	Types []string
	// StreamPrefix, when set, keeps messages of streams whose name starts
	// with it.
	StreamPrefix string
}

// ReadAllQuery returns the namespace's messages that q selects, in global
// order or newest first (read on past the server's page byte cap, as
// ReadStream).
func (c *Client) ReadAllQuery(ctx context.Context, q AllQuery, opts ...ReadOption) ([]Message, error) {
	s := c.settings(opts)
	return c.readPages(ctx, q.Limit, func(ctx context.Context, m *member, limit int64, last *Message, resume *int64) (page, error) {
		from, ok := nextGlobal(q.GlobalPosition, q.Backward, last, resume)
		if !ok {
			return page{}, nil
		}
		r, err := m.events.ReadAll(ctx, connect.NewRequest(&skaldv1.ReadAllRequest{GlobalPosition: from, Limit: limit, Read: s.wire(c.session.Load()),
			Backward: q.Backward, Types: q.Types, StreamPrefix: q.StreamPrefix}))
		if err != nil {
			return page{}, err
		}
		c.observe(r.Msg.AppliedIndex)
		return page{fromWireAll(r.Msg.Messages), r.Msg.Truncated, r.Msg.ResumeFrom}, nil
	})
}

// nextGlobal is where a read in global order goes on: from the server's
// resume_from, else after last (nil: it starts at from); ok is false when a backward read has nothing below.
func nextGlobal(from int64, backward bool, last *Message, resume *int64) (int64, bool) {
	switch {
	case resume != nil:
		return *resume, true
	case last == nil:
		return from, true
	case backward:
		return last.GlobalPosition - 1, last.GlobalPosition > 1
	}
	return last.GlobalPosition + 1, true
}

// Query returns the namespace's messages that match q (an untagged message
// matches an item of types alone), with a global
// position above after, in global order; limit 0 means 1000, -1 no limit,
// at most 10000 (read on past the server's page byte cap, as ReadStream).
// The server merges its type and tag indexes: the cost follows the
// matches, not the namespace's size.
func (c *Client) Query(ctx context.Context, q Query, after, limit int64, opts ...ReadOption) ([]Message, error) {
	s := c.settings(opts)
	return c.readPages(ctx, limit, func(ctx context.Context, m *member, limit int64, last *Message, resume *int64) (page, error) {
		from := after
		switch {
		case resume != nil:
			from = *resume
		case last != nil:
			from = last.GlobalPosition
		}
		r, err := m.events.Query(ctx, connect.NewRequest(&skaldv1.QueryRequest{Query: q.wire(), After: from, Limit: limit, Read: s.wire(c.session.Load())}))
		if err != nil {
			return page{}, err
		}
		c.observe(r.Msg.AppliedIndex)
		return page{fromWireAll(r.Msg.Messages), r.Msg.Truncated, r.Msg.ResumeFrom}, nil
	})
}

// LastMessage returns the last message of stream (of type msgType when
// not empty); found is false when there is none.
func (c *Client) LastMessage(ctx context.Context, stream, msgType string, opts ...ReadOption) (msg Message, found bool, err error) {
	s := c.settings(opts)
	err = c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.events.LastMessage(ctx, connect.NewRequest(&skaldv1.LastMessageRequest{Stream: stream, Type: msgType, Read: s.wire(c.session.Load())}))
		if err == nil {
			c.observe(r.Msg.AppliedIndex)
			if found = r.Msg.Message != nil; found {
				msg = fromWire(r.Msg.Message)
			}
		}
		return err
	})
	return msg, found, err
}

// StreamVersion returns the stream's last position, -1 when it has no
// message.
func (c *Client) StreamVersion(ctx context.Context, stream string, opts ...ReadOption) (int64, error) {
	s := c.settings(opts)
	var version int64
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.events.StreamVersion(ctx, connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: stream, Read: s.wire(c.session.Load())}))
		if err == nil {
			c.observe(r.Msg.AppliedIndex)
			version = r.Msg.Version
		}
		return err
	})
	return version, err
}

// StreamInfo describes one stream.
type StreamInfo struct {
	Stream       string
	Version      int64
	LastActivity time.Time
}

// ListStreams returns one page of the streams whose names start with
// prefix and sort after cursor (exclusive; "" from the start); limit 0
// means 100, at most 1000. next is the cursor of the following page, ""
// after the last; a page may be short, even empty, and still have one
// (the server passed over many deleted streams): page on until next is "".
func (c *Client) ListStreams(ctx context.Context, prefix, cursor string, limit int32, opts ...ReadOption) (streams []StreamInfo, next string, err error) {
	s := c.settings(opts)
	err = c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.events.ListStreams(ctx, connect.NewRequest(&skaldv1.ListStreamsRequest{Prefix: prefix, Cursor: cursor, Limit: limit, Read: s.wire(c.session.Load())}))
		if err != nil {
			return err
		}
		c.observe(r.Msg.AppliedIndex)
		streams = make([]StreamInfo, len(r.Msg.Streams))
		for i, st := range r.Msg.Streams {
			streams[i] = StreamInfo{Stream: st.Stream, Version: st.Version, LastActivity: st.LastActivity.AsTime()}
		}
		next = r.Msg.NextCursor
		return nil
	})
	return streams, next, err
}

// CategoryInfo describes one category.
type CategoryInfo struct {
	Category     string
	StreamCount  int64
	MessageCount int64
}

// ListCategories returns every category of the namespace in byte order,
// reading page after page (the server answers at most 1000 a call).
func (c *Client) ListCategories(ctx context.Context, opts ...ReadOption) ([]CategoryInfo, error) {
	s := c.settings(opts)
	out := []CategoryInfo{}
	for cursor := ""; ; {
		var next string
		err := c.read(ctx, func(ctx context.Context, m *member) error {
			r, err := m.events.ListCategories(ctx, connect.NewRequest(&skaldv1.ListCategoriesRequest{Read: s.wire(c.session.Load()), Cursor: cursor}))
			if err != nil {
				return err
			}
			c.observe(r.Msg.AppliedIndex)
			for _, ci := range r.Msg.Categories {
				out = append(out, CategoryInfo{Category: ci.Category, StreamCount: ci.StreamCount, MessageCount: ci.MessageCount})
			}
			next = r.Msg.NextCursor
			return nil
		})
		if err != nil || next == "" {
			return out, err
		}
		cursor = next
	}
}
