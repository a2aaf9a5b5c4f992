package client

import (
	"context"
	"errors"
	"iter"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Subscription selects what Subscribe delivers: set exactly one of Stream,
// Category or All.
type Subscription struct {
	Stream   string
	Category string
	All      bool

	// Position is the first stream position delivered (Stream).
	Position int64
	// GlobalPosition is the first global position delivered (Category,
	// All); 0 means 1.
	GlobalPosition int64

	// Group and Correlation filter a Category subscription.
	Group       ConsumerGroup
	Correlation string

	// CaughtUp, when set, is called once: after every message stored
	// when the subscription started was delivered, before the first one
	// appended later.
	CaughtUp func()
}

// subscribeIdle is how long a subscription may stay silent (servers send a
// heartbeat after 15 s without a message) before the client takes its
// member for dead and resumes on another.
const subscribeIdle = 40 * time.Second

// Subscribe delivers the selected messages in order: the stored ones, then
// each new one as it is applied. When the member serving it fails (or cuts
// off a consumer too far behind), the subscription resumes on another
// member after the last message delivered, so the sequence has no gap and
// no repeat. Reads for the resume are session-consistent (or as opts say).
//
// The sequence ends after yielding a non-nil error: ctx's error when it
// ends, or a definite refusal (ErrInvalidArgument, ErrUnauthenticated,
// ErrPermissionDenied; ErrUnauthenticated also when the namespace is
// deleted). Breaking out of the loop ends the subscription.
func (c *Client) Subscribe(ctx context.Context, sub Subscription, opts ...ReadOption) iter.Seq2[Message, error] {
	s := c.settings(opts)
	return func(yield func(Message, error) bool) {
		if c.closed.Load() {
			yield(Message{}, ErrClosed)
			return
		}
		next := sub.Position // the next position (stream) or global position
		if sub.Stream == "" {
			next = max(sub.GlobalPosition, 1)
		}
		caughtUp := sub.CaughtUp == nil
		tried := map[*member]bool{}
		var (
			last  error
			lastM *member
		)
		for round := 0; ; {
			if ctx.Err() != nil {
				yield(Message{}, ctx.Err())
				return
			}
			m := c.view.pick(false, tried)
			if m == nil {
				if c.cfg.FailFast && last != nil {
					yield(Message{}, exhausted(lastM, last, false))
					return
				}
				if err := pause(ctx, round); err != nil {
					yield(Message{}, err)
					return
				}
				round++
				clear(tried)
				continue
			}
			tried[m] = true
			req := &skaldv1.SubscribeRequest{Correlation: sub.Correlation, ConsumerGroup: sub.Group.wire(), Read: s.wire(c.session.Load())}
			switch {
			case sub.Stream != "":
				req.Target, req.Position = &skaldv1.SubscribeRequest_Stream{Stream: sub.Stream}, next
			case sub.Category != "":
				req.Target, req.GlobalPosition = &skaldv1.SubscribeRequest_Category{Category: sub.Category}, next
			default:
				req.Target, req.GlobalPosition = &skaldv1.SubscribeRequest_All{All: true}, next
			}
			delivered, stop, err := c.subscribeOn(ctx, m, req, &next, func(msg Message) bool { return yield(msg, nil) }, func() {
				if !caughtUp {
					caughtUp = true
					sub.CaughtUp()
				}
			})
			if stop {
				return
			}
			if delivered {
				round = 0
				clear(tried)
			}
			if ctx.Err() != nil {
				continue
			}
			switch {
			case connect.CodeOf(err) == connect.CodeResourceExhausted:
				// Cut off for lagging: resume at once from next.
			case readVerdict(err) == final && err != nil:
				yield(Message{}, serverError(m.url, asConnect(err)))
				return
			case !connect.IsWireError(err):
				c.view.failed(m)
				c.disc.soon()
			}
			last, lastM = err, m
		}
	}
}

// subscribeOn runs one Subscribe call on m until it fails, delivering
// every message at or after *next and advancing *next. stop reports that
// the consumer broke out of its loop.
func (c *Client) subscribeOn(ctx context.Context, m *member, req *skaldv1.SubscribeRequest, next *int64, deliver func(Message) bool, caughtUp func()) (delivered, stop bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := time.AfterFunc(subscribeIdle, cancel)
	defer idle.Stop()
	stream, err := m.events.Subscribe(sctx, connect.NewRequest(req))
	if err != nil {
		return false, false, err
	}
	defer stream.Close()
	byStream := req.GetStream() != ""
	for stream.Receive() {
		idle.Reset(subscribeIdle)
		switch e := stream.Msg().Event.(type) {
		case *skaldv1.SubscribeResponse_Message:
			msg := fromWire(e.Message)
			pos := msg.GlobalPosition
			if byStream {
				pos = msg.Position
			}
			if pos < *next {
				continue // delivered before a resume
			}
			*next = pos + 1
			if !delivered {
				delivered = true
				c.view.answered(m, false)
				c.served(m)
			}
			if !deliver(msg) {
				return delivered, true, nil
			}
		case *skaldv1.SubscribeResponse_CaughtUp:
			c.observe(e.CaughtUp.AppliedIndex)
			c.view.answered(m, false)
			caughtUp()
		}
	}
	err = stream.Err()
	if err == nil {
		err = errors.New("skald: subscription ended by the server")
	}
	return delivered, false, err
}
