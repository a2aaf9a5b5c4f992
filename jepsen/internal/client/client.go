// Package client owns the chaos harness's recording client: every call to
// a node is recorded as an invocation and a completion whose type says
// what the harness may assume (ok, fail: certainly no effect, info: maybe).
// It never retries on its own and never reuses a message id; the
// idempotent workload sends an append again (a new operation with the
// same ids and data) when its outcome is unknown.
package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/jepsen/internal/history"
)

// Client records operations against the nodes of one cluster.
type Client struct {
	rec     *history.Recorder
	nodes   map[string]skaldv1connect.EventStoreClient
	groups  map[string]skaldv1connect.SubscriptionsClient
	indexes map[string]skaldv1connect.IndexesClient
	timeout time.Duration
	seq     atomic.Uint64
}

// New returns a client for nodes (name → base URL) that authenticates with
// token and gives every call timeout.
func New(rec *history.Recorder, nodes map[string]string, token string, timeout time.Duration) *Client {
	c := &Client{rec: rec, nodes: map[string]skaldv1connect.EventStoreClient{}, groups: map[string]skaldv1connect.SubscriptionsClient{},
		indexes: map[string]skaldv1connect.IndexesClient{}, timeout: timeout}
	for name, url := range nodes {
		c.nodes[name] = skaldv1connect.NewEventStoreClient(HTTPClient(), url, connect.WithInterceptors(Bearer(token)))
		c.groups[name] = skaldv1connect.NewSubscriptionsClient(HTTPClient(), url, connect.WithInterceptors(Bearer(token)))
		c.indexes[name] = skaldv1connect.NewIndexesClient(HTTPClient(), url, connect.WithInterceptors(Bearer(token)))
	}
	return c
}

// HTTPClient is a client with short dial and idle timeouts, so a dead
// node fails fast instead of holding a worker.
func HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}}
}

// NewID returns a message id no other call of this client returns: a UUID
// whose first group is the process and whose last is a sequence number.
func (c *Client) NewID(process int) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(process), c.seq.Add(1))
}

// Append appends one message per id to stream, expecting version exp
// (nil: any), through node.
func (c *Client) Append(ctx context.Context, process int, node, stream string, ids []string, exp *int64) history.Op {
	return c.AppendTagged(ctx, process, node, stream, ids, exp, process)
}

// AppendTagged is Append with the messages' data naming tag rather than the
// process: a retry of an append (another process) must send the same data.
func (c *Client) AppendTagged(ctx context.Context, process int, node, stream string, ids []string, exp *int64, tag int) history.Op {
	v := history.Value{Stream: stream, IDs: ids, Expected: exp}
	req := &skaldv1.AppendRequest{Stream: stream, ExpectedVersion: exp}
	for _, id := range ids {
		req.Messages = append(req.Messages, &skaldv1.NewMessage{Id: id, Type: "Jepsen", Data: []byte(`{"p":` + fmt.Sprint(tag) + `}`)})
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

// AppendIf appends one message with tags to stream, on condition that no
// message carrying any of cond.AnyTags has a global position above
// cond.After (each tag one query item), through node.
func (c *Client) AppendIf(ctx context.Context, process int, node, stream, id string, tags []string, cond history.Condition) history.Op {
	v := history.Value{Stream: stream, IDs: []string{id}, Tags: tags, Condition: &cond}
	q := &skaldv1.Query{}
	for _, t := range cond.AnyTags {
		q.Items = append(q.Items, &skaldv1.QueryItem{Tags: []string{t}})
	}
	req := &skaldv1.AppendRequest{Stream: stream, Messages: []*skaldv1.NewMessage{{Id: id, Type: "Decided", Data: []byte(`{"p":` + fmt.Sprint(process) + `}`), Tags: tags}},
		Condition: &skaldv1.AppendCondition{FailIfEventsMatch: q, After: cond.After}}
	return c.call(ctx, process, node, history.FAppend, v, func(ctx context.Context, es skaldv1connect.EventStoreClient) (*history.Result, error) {
		resp, err := es.Append(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		m := resp.Msg
		return &history.Result{Pos: m.FirstPosition, Global: m.FirstGlobalPosition, Index: m.Index, Duplicate: m.Duplicate}, nil
	})
}

// Query reads the messages carrying any of tags above global position
// after, through node.
func (c *Client) Query(ctx context.Context, process int, node string, tags []string, after, limit int64, opts ReadOptions) history.Op {
	v := history.Value{Tags: tags, From: after, Limit: limit, Consistency: opts.Consistency, MinIndex: opts.MinIndex}
	q := &skaldv1.Query{}
	for _, t := range tags {
		q.Items = append(q.Items, &skaldv1.QueryItem{Tags: []string{t}})
	}
	return c.call(ctx, process, node, history.FQuery, v, func(ctx context.Context, es skaldv1connect.EventStoreClient) (*history.Result, error) {
		resp, err := es.Query(ctx, connect.NewRequest(&skaldv1.QueryRequest{Query: q, After: after, Limit: limit, Read: opts.proto()}))
		if err != nil {
			return nil, err
		}
		return &history.Result{Index: resp.Msg.AppliedIndex, Events: events(resp.Msg.Messages)}, nil
	})
}

// Truncate removes the messages of stream below position before.
func (c *Client) Truncate(ctx context.Context, process int, node, stream string, before int64) history.Op {
	v := history.Value{Stream: stream, From: before}
	return c.call(ctx, process, node, history.FTruncate, v, func(ctx context.Context, es skaldv1connect.EventStoreClient) (*history.Result, error) {
		resp, err := es.TruncateStream(ctx, connect.NewRequest(&skaldv1.TruncateStreamRequest{Stream: stream, Before: before}))
		if err != nil {
			return nil, err
		}
		return &history.Result{Version: resp.Msg.Version, Index: resp.Msg.Index, Deleted: resp.Msg.MessagesDeleted}, nil
	})
}

// DeleteStream deletes stream if it is at version exp: every message up to
// exp goes; hard also leaves a tombstone (every later append fails).
func (c *Client) DeleteStream(ctx context.Context, process int, node, stream string, exp int64, hard bool) history.Op {
	v := history.Value{Stream: stream, Expected: &exp, Hard: hard}
	return c.call(ctx, process, node, history.FDelete, v, func(ctx context.Context, es skaldv1connect.EventStoreClient) (*history.Result, error) {
		resp, err := es.DeleteStream(ctx, connect.NewRequest(&skaldv1.DeleteStreamRequest{Stream: stream, ExpectedVersion: &exp, Hard: hard}))
		if err != nil {
			return nil, err
		}
		return &history.Result{Version: resp.Msg.Version, Index: resp.Msg.Index, Deleted: resp.Msg.MessagesDeleted}, nil
	})
}

// DeleteByWatermark removes, in category, each stream's positions up to
// its watermark.
func (c *Client) DeleteByWatermark(ctx context.Context, process int, node, category string, marks map[string]int64) history.Op {
	v := history.Value{Category: category, Watermarks: marks}
	return c.call(ctx, process, node, history.FWatermark, v, func(ctx context.Context, es skaldv1connect.EventStoreClient) (*history.Result, error) {
		resp, err := es.DeleteByWatermark(ctx, connect.NewRequest(&skaldv1.DeleteByWatermarkRequest{Category: category, Watermarks: marks}))
		if err != nil {
			return nil, err
		}
		return &history.Result{Index: resp.Msg.Index, Deleted: resp.Msg.MessagesDeleted}, nil
	})
}

// ReadStream reads stream from position from.
func (c *Client) ReadStream(ctx context.Context, process int, node, stream string, from, limit int64, opts ReadOptions) history.Op {
	v := history.Value{Stream: stream, From: from, Limit: limit, Consistency: opts.Consistency, MinIndex: opts.MinIndex}
	return c.call(ctx, process, node, history.FReadStream, v, func(ctx context.Context, es skaldv1connect.EventStoreClient) (*history.Result, error) {
		resp, err := es.ReadStream(ctx, connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: stream, Position: from, Limit: limit, Read: opts.proto()}))
		if err != nil {
			return nil, err
		}
		return &history.Result{Index: resp.Msg.AppliedIndex, Events: events(resp.Msg.Messages)}, nil
	})
}

// ReadCategory reads category from global position from.
func (c *Client) ReadCategory(ctx context.Context, process int, node, category string, from, limit int64, opts ReadOptions) history.Op {
	v := history.Value{Category: category, From: from, Limit: limit, Consistency: opts.Consistency, MinIndex: opts.MinIndex}
	return c.call(ctx, process, node, history.FReadCategory, v, func(ctx context.Context, es skaldv1connect.EventStoreClient) (*history.Result, error) {
		resp, err := es.ReadCategory(ctx, connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: category, GlobalPosition: from, Limit: limit, Read: opts.proto()}))
		if err != nil {
			return nil, err
		}
		return &history.Result{Index: resp.Msg.AppliedIndex, Events: events(resp.Msg.Messages)}, nil
	})
}

// Version reads stream's version.
func (c *Client) Version(ctx context.Context, process int, node, stream string, opts ReadOptions) history.Op {
	v := history.Value{Stream: stream, Consistency: opts.Consistency, MinIndex: opts.MinIndex}
	return c.call(ctx, process, node, history.FVersion, v, func(ctx context.Context, es skaldv1connect.EventStoreClient) (*history.Result, error) {
		resp, err := es.StreamVersion(ctx, connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: stream, Read: opts.proto()}))
		if err != nil {
			return nil, err
		}
		return &history.Result{Index: resp.Msg.AppliedIndex, Version: resp.Msg.Version}, nil
	})
}

// ReadAll reads the namespace log from global position from, unrecorded:
// the final reads after healing.
func (c *Client) ReadAll(ctx context.Context, node string, from, limit int64, consistency string) ([]history.Event, uint64, error) {
	es, ok := c.nodes[node]
	if !ok {
		return nil, 0, fmt.Errorf("unknown node %s", node)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := es.ReadAll(ctx, connect.NewRequest(&skaldv1.ReadAllRequest{GlobalPosition: from, Limit: limit, Read: ReadOptions{Consistency: consistency}.proto()}))
	if err != nil {
		return nil, 0, err
	}
	return events(resp.Msg.Messages), resp.Msg.AppliedIndex, nil
}

// ReadOptions is a read's consistency as the history records it.
type ReadOptions struct {
	Consistency string // history.Linearizable, Session or Local
	MinIndex    uint64
}

func (o ReadOptions) proto() *skaldv1.ReadOptions {
	c := skaldv1.Consistency_CONSISTENCY_LINEARIZABLE
	switch o.Consistency {
	case history.Session:
		c = skaldv1.Consistency_CONSISTENCY_SESSION
	case history.Local:
		c = skaldv1.Consistency_CONSISTENCY_LOCAL
	}
	return &skaldv1.ReadOptions{Consistency: c, MinIndex: o.MinIndex}
}

func events(ms []*skaldv1.Message) []history.Event {
	out := make([]history.Event, len(ms))
	for i, m := range ms {
		out[i] = history.Event{ID: m.Id, Stream: m.Stream, Pos: m.Position, Global: m.GlobalPosition, Tags: strings.Join(m.Tags, ",")}
	}
	return out
}

// call records the invocation, makes the call with the client's timeout
// and records the completion, classified by Classify.
func (c *Client) call(ctx context.Context, process int, node, f string, v history.Value, do func(context.Context, skaldv1connect.EventStoreClient) (*history.Result, error)) history.Op {
	c.rec.Add(history.Op{Process: process, Type: history.Invoke, F: f, Node: node, Value: v})
	start := time.Now()
	es, ok := c.nodes[node]
	var (
		res *history.Result
		err error
	)
	if ok {
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		res, err = do(cctx, es)
		cancel()
	} else {
		err = connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unknown node %s", node))
	}
	op := history.Op{Process: process, F: f, Node: node, Value: v, Result: res, LatencyNS: int64(time.Since(start))}
	if err != nil {
		op.Error = err.Error()
		if actual, ok := conflictActual(err); ok {
			op.Result = &history.Result{Actual: &actual}
		}
		if match, ok := conditionMatch(err); ok {
			op.Result = &history.Result{Match: match}
		}
	}
	op.Type = Classify(f, err)
	return c.rec.Add(op)
}

// Bearer adds the token to every request.
type Bearer string

func (t Bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(t))
		return next(ctx, req)
	}
}

func (t Bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(t))
		return conn
	}
}

func (t Bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
