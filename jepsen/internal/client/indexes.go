package client

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/jepsen/internal/history"
)

// The indexes workload's calls: appends whose messages the workload
// chooses (their bodies are recorded, so the checker can compute which
// index entries they make), recorded index queries, and the unrecorded
// index creation and final index reads.

// AppendBodies appends one message per id, with the type, data and tags
// of the body at the same place, to stream through node.
func (c *Client) AppendBodies(ctx context.Context, process int, node, stream string, ids []string, bodies []history.Body) history.Op {
	v := history.Value{Stream: stream, IDs: ids, Bodies: bodies}
	req := &skaldv1.AppendRequest{Stream: stream}
	for i, id := range ids {
		b := bodies[i]
		req.Messages = append(req.Messages, &skaldv1.NewMessage{Id: id, Type: b.Type, Data: []byte(b.Data), Tags: b.Tags})
	}
	return c.call(ctx, process, node, history.FAppend, v, func(ctx context.Context, es skaldv1connect.EventStoreClient) (*history.Result, error) {
		resp, err := es.Append(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		m := resp.Msg
		return &history.Result{Pos: m.FirstPosition, Global: m.FirstGlobalPosition, Index: m.Index, Duplicate: m.Duplicate}, nil
	})
}

// IndexQuery reads one page (up to limit hits, with their messages) of
// the index range q through node.
func (c *Client) IndexQuery(ctx context.Context, process int, node string, q history.IndexQuery, limit int32, opts ReadOptions) history.Op {
	v := history.Value{Index: &q, Limit: int64(limit), Consistency: opts.Consistency, MinIndex: opts.MinIndex}
	req := indexRequest(q, limit, opts)
	c.rec.Add(history.Op{Process: process, Type: history.Invoke, F: history.FIndexQuery, Node: node, Value: v})
	start := time.Now()
	ix, ok := c.indexes[node]
	var (
		res *history.Result
		err error
	)
	if ok {
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		var resp *connect.Response[skaldv1.IndexesQueryResponse]
		if resp, err = ix.Query(cctx, connect.NewRequest(req)); err == nil {
			m := resp.Msg
			res = &history.Result{Index: m.AppliedIndex, More: len(m.NextCursor) > 0, Entries: m.GetStatus().GetEntries()}
			for _, h := range m.Hits {
				if h.Message == nil {
					err = fmt.Errorf("hit at global position %d has no message", h.GlobalPosition)
					break
				}
				res.Events = append(res.Events, events([]*skaldv1.Message{h.Message})...)
				res.Values = append(res.Values, h.Values)
			}
		}
		cancel()
	} else {
		err = connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unknown node %s", node))
	}
	op := history.Op{Process: process, F: history.FIndexQuery, Node: node, Value: v, Result: res, LatencyNS: int64(time.Since(start))}
	if err != nil {
		op.Result, op.Error = nil, err.Error()
	}
	op.Type = Classify(history.FIndexQuery, err)
	return c.rec.Add(op)
}

func indexRequest(q history.IndexQuery, limit int32, opts ReadOptions) *skaldv1.IndexesQueryRequest {
	req := &skaldv1.IndexesQueryRequest{Name: q.Name, Limit: limit, Read: opts.proto(), Prefix: q.Prefix}
	if q.Equal != nil {
		req.Equal = []string{*q.Equal}
	}
	if q.From != nil {
		req.From = &skaldv1.IndexBound{Value: *q.From}
	}
	if q.To != nil {
		req.To = &skaldv1.IndexBound{Value: *q.To}
	}
	return req
}

// CreateIndex declares d (an event index) through node, unrecorded: the
// runner does it before traffic.
func (c *Client) CreateIndex(ctx context.Context, node string, d history.IndexDef) error {
	ix, ok := c.indexes[node]
	if !ok {
		return fmt.Errorf("unknown node %s", node)
	}
	def := &skaldv1.IndexDefinition{Name: d.Name, Version: 1, Category: d.Category, Types: d.Types, Kind: skaldv1.IndexKind_INDEX_KIND_EVENT}
	if len(d.Tags) > 0 {
		def.Query = &skaldv1.Query{}
		for _, t := range d.Tags {
			def.Query.Items = append(def.Query.Items, &skaldv1.QueryItem{Tags: []string{t}})
		}
	}
	f := &skaldv1.IndexField{Source: skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, Pointer: d.Field}
	switch d.FieldType {
	case "int":
		f.Type = skaldv1.IndexFieldType_INDEX_FIELD_TYPE_INT
	case "string":
		f.Type = skaldv1.IndexFieldType_INDEX_FIELD_TYPE_STRING
	default:
		return fmt.Errorf("index %s: field type %q: want int or string", d.Name, d.FieldType)
	}
	def.Fields = []*skaldv1.IndexField{f}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := ix.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: def})); err != nil {
		return fmt.Errorf("create index %s on %s: %w", d.Name, node, err)
	}
	return nil
}

// ReadIndex reads the whole of index name on node at LOCAL, unrecorded
// (the final reads), page after page (positions and values only). The
// status is the last page's.
func (c *Client) ReadIndex(ctx context.Context, node, name string) (history.IndexRead, error) {
	ix, ok := c.indexes[node]
	if !ok {
		return history.IndexRead{}, fmt.Errorf("unknown node %s", node)
	}
	var out history.IndexRead
	var cursor []byte
	for {
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		resp, err := ix.Query(cctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: name, Limit: 1000, Cursor: cursor, PositionsOnly: true,
			Read: ReadOptions{Consistency: history.Local}.proto()}))
		cancel()
		if err != nil {
			return out, fmt.Errorf("read index %s on %s: %w", name, node, err)
		}
		m := resp.Msg
		for _, h := range m.Hits {
			out.Hits = append(out.Hits, history.IndexHit{Global: h.GlobalPosition, Values: h.Values})
		}
		out.Entries, out.Covered, out.Applied = m.GetStatus().GetEntries(), m.GetStatus().GetCoveredIndex(), m.AppliedIndex
		if len(m.NextCursor) == 0 {
			return out, nil
		}
		cursor = m.NextCursor
	}
}
