package kurrentdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/persistent"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/rpc"
)

// psRead serves PersistentSubscriptions.Read: the client's options
// first, then the group's deliveries as events (with their retry
// count) while the client acks and nacks them by event id.
//
// Invariants: nothing is sent before the group was found (an unknown
// group is the not-found error, before any message) and the
// confirmation is the first message; after it only events are sent
// (the Go client panics on anything else). Only the Consume goroutine
// sends; the receiving goroutine only settles.
func (s *Server) psRead(ctx context.Context, st *connect.BidiStream[persistent.ReadReq, persistent.ReadResp]) error {
	c, err := psCaller(ctx)
	if err != nil {
		return err
	}
	first, err := st.Receive()
	if err != nil {
		return received(err, "its options")
	}
	o := first.GetOptions()
	if o == nil {
		return invalid("a persistent subscription read starts with its options")
	}
	stream, name, err := psGroup(o, o.GetAll() != nil)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		return psError(err, stream, o.GetGroupName(), "persistent subscription %q on %q", o.GetGroupName(), stream)
	}
	if _, err := s.local.GetGroup(ctx, c, &skaldv1.GetGroupRequest{Name: name}); err != nil {
		return fail(err)
	}
	if err := st.Send(&persistent.ReadResp{Content: &persistent.ReadResp_SubscriptionConfirmation_{
		SubscriptionConfirmation: &persistent.ReadResp_SubscriptionConfirmation{
			SubscriptionId: stream + "::" + o.GetGroupName()}}}); err != nil {
		return err
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The receiver ends with the request body, when this handler returns
	// at the latest; it is not waited for, as a Receive cannot be
	// interrupted.
	go func() { cancel(s.settle(ctx, c, name, st)) }()
	ev := reader{structured: o.GetUuidOption().GetString_() == nil}
	err = s.local.Consume(ctx, c, &skaldv1.ConsumeRequest{Group: name, Consumer: "kurrentdb"},
		func(r *skaldv1.ConsumeResponse) error {
			d := r.GetDelivery()
			if d == nil {
				return nil // a heartbeat: HTTP/2 keeps the stream
			}
			return st.Send(&persistent.ReadResp{Content: &persistent.ReadResp_Event{Event: psEvent(ev.event(d.GetMessage()),
				d.GetDelivery())}})
		})
	cause := context.Cause(ctx)
	var stop *stopped
	switch {
	case errors.As(cause, &stop):
		// The settle outlives the subscription, within a bound.
		nctx, ncancel := context.WithTimeout(context.WithoutCancel(ctx), stopSettleTimeout)
		defer ncancel()
		s.settleEach(nctx, stop.ids, func(ids []string) error {
			_, err := s.local.Nack(nctx, c, &skaldv1.NackRequest{Group: name, Ids: ids,
				Action: skaldv1.NackAction_NACK_ACTION_RETRY, Reason: stop.reason})
			return err
		})
		err := connect.NewError(connect.CodeCanceled, fmt.Errorf("persistent subscription %q on %q stopped by a nack",
			o.GetGroupName(), stream))
		err.Meta().Set("exception", "persistent-subscription-dropped")
		err.Meta().Set("stream-name", stream)
		err.Meta().Set("group-name", o.GetGroupName())
		return err
	case errors.Is(cause, io.EOF), parent.Err() != nil:
		return nil // the client went
	case cause != nil && !errors.Is(cause, context.Canceled):
		return cause
	case err != nil:
		return fail(err)
	}
	return nil
}

// stopped ends a subscription whose client nacked ids with Stop. They
// are retried once the consumer has left, so none goes to it again.
type stopped struct {
	ids    []string
	reason string
}

func (*stopped) Error() string { return "stopped by the client" }

// stopSettleTimeout bounds the retry of the events a Stop nack names,
// made after the subscription ended.
const stopSettleTimeout = 5 * time.Second

// settle receives the client's acks and nacks until it closes its side,
// and settles each in the group: ack, or nack as park, retry (and
// Unknown), skip, or stop (the subscription ends: stopped).
func (s *Server) settle(ctx context.Context, c rpc.Caller, group string,
	st *connect.BidiStream[persistent.ReadReq, persistent.ReadResp]) error {
	for {
		m, err := st.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return io.EOF
			}
			return err
		}
		switch v := m.GetContent().(type) {
		case *persistent.ReadReq_Ack_:
			ids, err := eventIDs(v.Ack.GetIds())
			if err != nil {
				return err
			}
			s.settleEach(ctx, ids, func(ids []string) error {
				_, err := s.local.Ack(ctx, c, &skaldv1.AckRequest{Group: group, Ids: ids})
				return err
			})
		case *persistent.ReadReq_Nack_:
			ids, err := eventIDs(v.Nack.GetIds())
			if err != nil {
				return err
			}
			action := skaldv1.NackAction_NACK_ACTION_RETRY
			switch v.Nack.GetAction() {
			case persistent.ReadReq_Nack_Park:
				action = skaldv1.NackAction_NACK_ACTION_PARK
			case persistent.ReadReq_Nack_Skip:
				action = skaldv1.NackAction_NACK_ACTION_SKIP
			}
			reason := v.Nack.GetReason()
			if len(reason) > 1024 {
				reason = reason[:1024]
			}
			if v.Nack.GetAction() == persistent.ReadReq_Nack_Stop {
				return &stopped{ids: ids, reason: reason}
			}
			s.settleEach(ctx, ids, func(ids []string) error {
				_, err := s.local.Nack(ctx, c, &skaldv1.NackRequest{Group: group, Ids: ids, Action: action, Reason: reason})
				return err
			})
		default:
			return invalid("after its options a persistent subscription read sends only acks and nacks")
		}
	}
}

// settleEach settles ids with fn, all at once, or when that fails
// because one is not in flight (acked twice, or redelivered after its
// timeout) one by one, dropping those: KurrentDB ignores an ack of what
// it no longer waits for, and Skald's settles are all or nothing.
func (s *Server) settleEach(ctx context.Context, ids []string, fn func([]string) error) {
	if len(ids) == 0 {
		return
	}
	err := fn(ids)
	if err == nil || connect.CodeOf(err) != connect.CodeFailedPrecondition || len(ids) == 1 {
		if err != nil && ctx.Err() == nil {
			s.log.Debug("kurrentdb: settle", "ids", len(ids), "err", err)
		}
		return
	}
	for _, id := range ids {
		if err := fn([]string{id}); err != nil && ctx.Err() == nil {
			s.log.Debug("kurrentdb: settle", "id", id, "err", err)
		}
	}
}

// eventIDs are the canonical ids of the events a client settles, at most
// as many as one Skald settle takes.
func eventIDs(in []*shared.UUID) ([]string, error) {
	if len(in) > maxSettleIDs {
		return nil, invalid("an ack or nack lists %d ids (limit %d)", len(in), maxSettleIDs)
	}
	out := make([]string, 0, len(in))
	for _, id := range in {
		if v, ok := id.GetValue().(*shared.UUID_String_); ok {
			out = append(out, v.String_) // as sent: Skald's ids need not be UUIDs
			continue
		}
		s, err := idOf(id)
		if err != nil {
			return nil, invalid("ack or nack: %v", err)
		}
		out = append(out, s)
	}
	return out, nil
}

// maxSettleIDs is the most ids one Skald Ack or Nack takes.
const maxSettleIDs = 10_000

// psEvent is a Skald delivery as a persistent subscription's event: the
// read event's fields, and the delivery's retry count (deliveries
// before this one).
func psEvent(e *streams.ReadResp_ReadEvent, delivery int32) *persistent.ReadResp_ReadEvent {
	r := e.GetEvent()
	return &persistent.ReadResp_ReadEvent{
		Event: &persistent.ReadResp_ReadEvent_RecordedEvent{
			Id: r.GetId(), StreamIdentifier: r.GetStreamIdentifier(), StreamRevision: r.GetStreamRevision(),
			PreparePosition: r.GetPreparePosition(), CommitPosition: r.GetCommitPosition(),
			Metadata: r.GetMetadata(), CustomMetadata: r.GetCustomMetadata(), Data: r.GetData(),
		},
		Position: &persistent.ReadResp_ReadEvent_CommitPosition{CommitPosition: r.GetCommitPosition()},
		Count:    &persistent.ReadResp_ReadEvent_RetryCount{RetryCount: max(delivery-1, 0)},
	}
}
