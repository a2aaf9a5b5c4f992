package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
	peerv1 "github.com/skalddb/skald/node/peerv1"
)

// Relaying subscription-group consumers and settlements from a follower
// to the leader, which owns every group's deliveries.

// groupCallError is how the peer service answers a failed group call: not
// leader as a not-applied FAILED_PRECONDITION (the follower retries
// elsewhere), a rejection as a message the follower decodes.
func groupCallError(err error) error {
	if errors.Is(err, errNotLeader) || errors.Is(err, nodeapi.ErrShutdown) {
		return notApplied(connect.CodeFailedPrecondition, err)
	}
	if rej, ok := rejectionOf(err); ok {
		ce := connect.NewError(connect.CodeFailedPrecondition, errors.New(rej.Message))
		if d, derr := rejectionDetail(rej); derr == nil {
			ce.AddDetail(d)
		}
		return ce
	}
	if errors.Is(err, context.Canceled) {
		return connect.NewError(connect.CodeCanceled, err)
	}
	return connect.NewError(connect.CodeUnavailable, err)
}

// groupPeerError is the inverse of groupCallError on the follower.
func groupPeerError(err error, what string) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		if rej, ok := rejectionIn(ce); ok {
			return errorOf(rej)
		}
		if ce.Code() == connect.CodeCanceled {
			return context.Canceled
		}
	}
	c := classify(err, what)
	if errors.Is(c, nodeapi.ErrUnknownOutcome) {
		// Nothing here is a write whose outcome matters: the consumer
		// reconnects, an unanswered ack is redelivered.
		return nodeapi.ErrNoLeader
	}
	return c
}

func (p *peerServer) GroupConsume(ctx context.Context, req *connect.Request[peerv1.GroupConsumeRequest],
	stream *connect.ServerStream[peerv1.GroupConsumeResponse]) error {
	m := req.Msg
	// Only the local owner: a peer never relays again.
	err := p.n.groups.Consume(ctx, m.Namespace, m.Group, m.Consumer, func(d nodeapi.GroupDelivery) error {
		return stream.Send(&peerv1.GroupConsumeResponse{
			GlobalPosition: d.Message.GlobalPosition, Delivery: d.Delivery, Message: storedOf(d.Message),
		})
	}, func() error { return stream.Send(&peerv1.GroupConsumeResponse{}) })
	return groupCallError(err)
}

func (p *peerServer) GroupSettle(ctx context.Context, req *connect.Request[peerv1.GroupSettleRequest],
) (*connect.Response[peerv1.GroupSettleResponse], error) {
	m := req.Msg
	err := p.n.groups.Settle(m.Namespace, m.Group, m.Ids, nodeapi.SettleAction(m.Action), m.Reason)
	if err == nil {
		return connect.NewResponse(&peerv1.GroupSettleResponse{}), nil
	}
	if rej, ok := rejectionOf(err); ok {
		return connect.NewResponse(&peerv1.GroupSettleResponse{Rejection: rej}), nil
	}
	return nil, groupCallError(err)
}

func storedOf(m fsm.Message) *fsmv1.StoredMessage {
	return &fsmv1.StoredMessage{
		Id: m.ID, Stream: m.Stream, Type: m.Type, Position: m.Position, Data: m.Data, Metadata: m.Metadata,
		TimeUnixNano: m.Time,
	}
}

func messageOf(gp int64, s *fsmv1.StoredMessage) fsm.Message {
	return fsm.Message{
		ID: s.Id, Stream: s.Stream, Type: s.Type, Position: s.Position, GlobalPosition: gp, Data: s.Data,
		Metadata: s.Metadata, Time: s.TimeUnixNano,
	}
}

// groupConsume relays a consumer to the leader at addr.
func (c *peerClients) groupConsume(ctx context.Context, addr, ns, group, consumer string,
	deliver func(nodeapi.GroupDelivery) error, heartbeat func() error) error {
	req := connect.NewRequest(&peerv1.GroupConsumeRequest{Namespace: ns, Group: group, Consumer: consumer})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.client(addr).GroupConsume(ctx, req)
	if err != nil {
		return relayConsumeError(err)
	}
	defer stream.Close()
	for stream.Receive() {
		m := stream.Msg()
		if m.Message == nil {
			if err := heartbeat(); err != nil {
				return err
			}
			continue
		}
		d := nodeapi.GroupDelivery{Message: messageOf(m.GlobalPosition, m.Message), Delivery: m.Delivery}
		if err := deliver(d); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := stream.Err(); err != nil {
		return relayConsumeError(err)
	}
	// The leader ended the stream without an error: it is going away.
	return fmt.Errorf("%w: the leader ended the stream", errRelayLost)
}

// relayConsumeError is why a consumer's relay to the leader ended. A
// rejection (the group was deleted, too many consumers), a full disk, a
// cancelled call and the leader's not-leader answer are what they are;
// anything else is the stream breaking (the leader crashed, was cut off,
// or is shutting down): errRelayLost, so that Node.Consume looks for the
// new leader without ending the client's stream.
func relayConsumeError(err error) error {
	c := groupPeerError(err, "relay consumer")
	if errors.Is(c, nodeapi.ErrNoLeader) {
		return fmt.Errorf("%w: %v", errRelayLost, err)
	}
	return c
}

func (c *peerClients) groupSettle(ctx context.Context, addr string, m *peerv1.GroupSettleRequest) error {
	req := connect.NewRequest(m)
	resp, err := c.client(addr).GroupSettle(ctx, req)
	if err != nil {
		return groupPeerError(err, "relay settle")
	}
	if r := resp.Msg.Rejection; r != nil {
		return errorOf(r)
	}
	return nil
}

func (p *peerServer) GroupStats(_ context.Context, req *connect.Request[peerv1.GroupStatsRequest],
) (*connect.Response[peerv1.GroupStatsResponse], error) {
	st, _ := p.n.groups.Stats(req.Msg.Namespace, req.Msg.Group)
	return connect.NewResponse(&peerv1.GroupStatsResponse{
		Active: st.Active, Consumers: int32(st.Consumers), InFlight: st.InFlight, Lag: st.Lag,
		Redeliveries: st.Redeliveries, Acked: st.Acked, Parked: st.Parked,
	}), nil
}

func (c *peerClients) groupStats(ctx context.Context, addr, ns, group string) (nodeapi.GroupState, bool) {
	req := connect.NewRequest(&peerv1.GroupStatsRequest{Namespace: ns, Group: group})
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := c.client(addr).GroupStats(ctx, req)
	if err != nil {
		return nodeapi.GroupState{}, false
	}
	m := resp.Msg
	return nodeapi.GroupState{
		Active: m.Active, Consumers: int(m.Consumers), InFlight: m.InFlight, Lag: m.Lag,
		Redeliveries: m.Redeliveries, Acked: m.Acked, Parked: m.Parked,
	}, m.Active
}
