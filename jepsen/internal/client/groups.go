package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/jepsen/internal/history"
)

// Persistent subscriptions: the consumers workload's calls.

func (c *Client) subs(node string) (skaldv1connect.SubscriptionsClient, bool) {
	sc, ok := c.groups[node]
	return sc, ok
}

// CreateGroup creates a pinned group over category through node,
// unrecorded (set-up). An existing group of that name is fine.
func (c *Client) CreateGroup(ctx context.Context, node, group, category string) error {
	sc, ok := c.subs(node)
	if !ok {
		return fmt.Errorf("unknown node %s", node)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	_, err := sc.CreateGroup(ctx, connect.NewRequest(&skaldv1.CreateGroupRequest{
		Name: group, Source: &skaldv1.CreateGroupRequest_Category{Category: category},
		Settings: &skaldv1.GroupSettings{
			Strategy: skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED, MaxRetries: proto.Int32(1000),
			AckTimeout: durationpb.New(2 * time.Second), MaxInFlightPerConsumer: proto.Int32(16),
			CheckpointAfter: proto.Int32(10), CheckpointInterval: durationpb.New(100 * time.Millisecond),
		},
	}))
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return nil
	}
	return err
}

// Delivery is one message a consumer received.
type Delivery struct {
	ID      string
	Stream  string
	Pos     int64
	Global  int64
	Attempt int32
}

// Consume attaches a consumer to group through node and records every
// delivery as an ok "deliver" operation of process (invocation and
// completion at receipt), then hands it to handle, until the stream ends
// (its error) or ctx does. handle runs before the next delivery is read.
func (c *Client) Consume(ctx context.Context, process func() int, node, group, consumer string, handle func(Delivery)) error {
	sc, ok := c.subs(node)
	if !ok {
		return fmt.Errorf("unknown node %s", node)
	}
	stream, err := sc.Consume(ctx, connect.NewRequest(&skaldv1.ConsumeRequest{Group: group, Consumer: consumer}))
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Receive() {
		d := stream.Msg().GetDelivery()
		if d == nil {
			continue
		}
		m := d.Message
		dv := Delivery{ID: m.Id, Stream: m.Stream, Pos: m.Position, Global: m.GlobalPosition, Attempt: d.Delivery}
		p := process()
		v := history.Value{Group: group, Stream: m.Stream, IDs: []string{m.Id}}
		c.rec.Add(history.Op{Process: p, Type: history.Invoke, F: history.FDeliver, Node: node, Value: v})
		c.rec.Add(history.Op{Process: p, Type: history.OK, F: history.FDeliver, Node: node, Value: v,
			Result: &history.Result{Pos: m.Position, Global: m.GlobalPosition, Attempt: d.Delivery, Stream: m.Stream}})
		handle(dv)
	}
	if err := stream.Err(); err != nil {
		return err
	}
	return errors.New("consume stream ended")
}

// Ack acknowledges id in group through node, recorded.
func (c *Client) Ack(ctx context.Context, process int, node, group, id string) history.Op {
	v := history.Value{Group: group, IDs: []string{id}}
	c.rec.Add(history.Op{Process: process, Type: history.Invoke, F: history.FAck, Node: node, Value: v})
	start := time.Now()
	var err error
	if sc, ok := c.subs(node); ok {
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		_, err = sc.Ack(cctx, connect.NewRequest(&skaldv1.AckRequest{Group: group, Ids: []string{id}}))
		cancel()
	} else {
		err = connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unknown node %s", node))
	}
	op := history.Op{Process: process, F: history.FAck, Node: node, Value: v, LatencyNS: int64(time.Since(start))}
	if err != nil {
		op.Error = err.Error()
	}
	op.Type = Classify(history.FAck, err)
	return c.rec.Add(op)
}
