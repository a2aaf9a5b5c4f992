package client

import (
	"context"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// User-defined indexes (docs/api.md, Indexes). Definitions and statuses
// are the API's own messages (skaldv1.IndexDefinition, IndexInfo,
// IndexStatus): they carry nothing a Go type would add to.

// IndexQuery selects entries of an index: values of the first fields
// (Equal), then a range (From, To) or a Prefix on the next one. Values
// are text read by the field's type (decimal ints, numbers, RFC 3339
// times, true or false).
type IndexQuery struct {
	Name       string
	Equal      []string
	From, To   *skaldv1.IndexBound
	Prefix     *string
	Descending bool
	// Limit: 0 means the server's default (100); at most 1000.
	Limit int32
	// Cursor is the NextCursor of the page before.
	Cursor        []byte
	PositionsOnly bool
}

// IndexHit is one entry of an index page.
type IndexHit struct {
	GlobalPosition int64
	Values         []string
	Message        *Message // nil with PositionsOnly
	// Stream is the entry's stream in a stream index, "" in an event
	// index.
	Stream string
}

// IndexPage is one page of an index query.
type IndexPage struct {
	Hits []IndexHit
	// NextCursor continues the query; nil at its end.
	NextCursor []byte
	// Truncated: the page stopped before its limit, perhaps with no hit
	// (the reply byte cap, or the server's scan budget for entries read
	// and not returned); NextCursor continues it.
	Truncated bool
	// Status is the answering node's progress on the index.
	Status *skaldv1.IndexStatus
}

// CreateIndex declares an index in namespace (empty: the token's own)
// and returns it as stored. A retry of a create whose outcome was lost
// may answer that the index exists.
func (c *Client) CreateIndex(ctx context.Context, namespace string, d *skaldv1.IndexDefinition) (*skaldv1.IndexDefinition, error) {
	resp, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.IndexesCreateResponse], error) {
		return m.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Namespace: namespace, Definition: d}))
	})
	if err != nil {
		return nil, err
	}
	return resp.Definition, nil
}

// RebuildIndex builds index name of namespace (empty: the token's own)
// again from the log: with d (a new definition of the same name, e.g. a
// new version) or, when d is nil, the current one. The current
// definition keeps answering queries on each node until that node has
// built the new one; IndexInfo's Rebuilding and RebuildStatus show the
// progress meanwhile. It returns the definition being built.
func (c *Client) RebuildIndex(ctx context.Context, namespace, name string, d *skaldv1.IndexDefinition) (*skaldv1.IndexDefinition, error) {
	resp, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.IndexesRebuildResponse], error) {
		return m.indexes.Rebuild(ctx, connect.NewRequest(&skaldv1.IndexesRebuildRequest{Namespace: namespace, Name: name, Definition: d}))
	})
	if err != nil {
		return nil, err
	}
	return resp.Definition, nil
}

// PauseIndex pauses index name of namespace (empty: the token's own) on
// every node: it keeps its checkpoint and answers LOCAL queries, while
// LINEARIZABLE and SESSION queries it cannot satisfy fail at once
// (ErrFailedPrecondition, naming the paused state). Pausing a paused
// index changes nothing.
func (c *Client) PauseIndex(ctx context.Context, namespace, name string) error {
	_, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.IndexesPauseResponse], error) {
		return m.indexes.Pause(ctx, connect.NewRequest(&skaldv1.IndexesPauseRequest{Namespace: namespace, Name: name}))
	})
	return err
}

// ResumeIndex lets a paused index advance again from its checkpoint on
// every node.
func (c *Client) ResumeIndex(ctx context.Context, namespace, name string) error {
	_, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.IndexesResumeResponse], error) {
		return m.indexes.Resume(ctx, connect.NewRequest(&skaldv1.IndexesResumeRequest{Namespace: namespace, Name: name}))
	})
	return err
}

// DeleteIndex drops an index of namespace (empty: the token's own).
func (c *Client) DeleteIndex(ctx context.Context, namespace, name string) error {
	_, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.IndexesDeleteResponse], error) {
		return m.indexes.Delete(ctx, connect.NewRequest(&skaldv1.IndexesDeleteRequest{Namespace: namespace, Name: name}))
	})
	return err
}

// Indexes lists namespace's indexes (empty: the token's own) with the
// answering node's progress on each.
func (c *Client) Indexes(ctx context.Context, namespace string, opts ...ReadOption) ([]*skaldv1.IndexInfo, error) {
	s := c.settings(opts)
	var out []*skaldv1.IndexInfo
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.indexes.List(ctx, connect.NewRequest(&skaldv1.IndexesListRequest{Namespace: namespace, Read: s.wire(c.session.Load())}))
		if err != nil {
			return err
		}
		c.observe(r.Msg.AppliedIndex)
		out = r.Msg.Indexes
		return nil
	})
	return out, err
}

// IndexInfo is one index's definition and the answering node's progress.
func (c *Client) IndexInfo(ctx context.Context, namespace, name string, opts ...ReadOption) (*skaldv1.IndexInfo, error) {
	s := c.settings(opts)
	var out *skaldv1.IndexInfo
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.indexes.Info(ctx, connect.NewRequest(&skaldv1.IndexesInfoRequest{Namespace: namespace, Name: name, Read: s.wire(c.session.Load())}))
		if err != nil {
			return err
		}
		c.observe(r.Msg.AppliedIndex)
		out = r.Msg.Index
		return nil
	})
	return out, err
}

// QueryIndex reads one page of an index of namespace (empty: the token's
// own). At the default consistency the page holds every write this
// client saw acknowledged (the server waits for its index).
func (c *Client) QueryIndex(ctx context.Context, namespace string, q IndexQuery, opts ...ReadOption) (IndexPage, error) {
	s := c.settings(opts)
	var page IndexPage
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{
			Namespace: namespace, Name: q.Name, Equal: q.Equal, From: q.From, To: q.To, Prefix: q.Prefix,
			Descending: q.Descending, Limit: q.Limit, Cursor: q.Cursor, PositionsOnly: q.PositionsOnly,
			Read: s.wire(c.session.Load()),
		}))
		if err != nil {
			return err
		}
		c.observe(r.Msg.AppliedIndex)
		page = IndexPage{NextCursor: r.Msg.NextCursor, Truncated: r.Msg.Truncated, Status: r.Msg.Status}
		if len(page.NextCursor) == 0 {
			page.NextCursor = nil
		}
		for _, h := range r.Msg.Hits {
			hit := IndexHit{GlobalPosition: h.GlobalPosition, Values: h.Values, Stream: h.Stream}
			if h.Message != nil {
				msg := fromWire(h.Message)
				hit.Message = &msg
			}
			page.Hits = append(page.Hits, hit)
		}
		return nil
	})
	return page, err
}
