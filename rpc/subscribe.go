package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node/nodeapi"
)

// subscribeConfig bounds subscriptions.
type subscribeConfig struct {
	// Heartbeat is the silence after which a heartbeat is sent. Default 15 s.
	Heartbeat time.Duration
	// MaxLag: a live subscriber further behind than this many messages is
	// cut off with ResourceExhausted (it resumes from its last position).
	// Default 10,000.
	MaxLag int64
	// Page is how many messages one store read fetches. Default 500.
	Page int
	// PageBytes caps one store read's messages (fsm.View.SetPageBytes):
	// a subscriber whose client stops reading holds one such page (at
	// least one message) and the message being sent. Default
	// DefaultSubscribePageBytes.
	PageBytes int
	// ScanBudget bounds the entries one store read examines and skips
	// (fsm.View.SetScanBudget): a sparse category subscription moves on
	// in steps of it. Default DefaultScanBudget.
	ScanBudget int
}

// DefaultSubscribePageBytes is subscribeConfig.PageBytes's default: one
// largest message (1 MiB of data and metadata) per page at worst.
const DefaultSubscribePageBytes = 1 << 20

func (c subscribeConfig) withDefaults() subscribeConfig {
	if c.Heartbeat <= 0 {
		c.Heartbeat = 15 * time.Second
	}
	if c.MaxLag <= 0 {
		c.MaxLag = 10_000
	}
	if c.Page <= 0 {
		c.Page = 500
	}
	if c.PageBytes <= 0 {
		c.PageBytes = DefaultSubscribePageBytes
	}
	if c.ScanBudget <= 0 {
		c.ScanBudget = DefaultScanBudget
	}
	return c
}

// subscription is one validated Subscribe request.
type subscription struct {
	stream, category string // one of them, or neither for all
	next             int64  // next stream position (stream) or global position
	member, size     int64
	correlation      string
	skipTo           int64 // no match below this global position (set by page)
}

func newSubscription(m *skaldv1.SubscribeRequest) (*subscription, error) {
	sub := &subscription{}
	if err := nonNegative("position", m.Position); err != nil {
		return nil, err
	}
	if err := nonNegative("global_position", m.GlobalPosition); err != nil {
		return nil, err
	}
	member, size, err := categoryFilters(m.Correlation, m.ConsumerGroup)
	if err != nil {
		return nil, err
	}
	switch t := m.Target.(type) {
	case *skaldv1.SubscribeRequest_Stream:
		if err := checkStream("stream", t.Stream); err != nil {
			return nil, err
		}
		if size > 0 || m.Correlation != "" {
			return nil, invalidField("consumer_group", "consumer groups and correlation need a category subscription")
		}
		sub.stream, sub.next = t.Stream, m.Position
	case *skaldv1.SubscribeRequest_Category:
		if err := checkCategory("category", t.Category); err != nil {
			return nil, err
		}
		sub.category, sub.next = t.Category, max(m.GlobalPosition, 1)
		sub.member, sub.size, sub.correlation = member, size, m.Correlation
	case *skaldv1.SubscribeRequest_All:
		if !t.All {
			return nil, invalidField("all", "must be true when it is the target")
		}
		if size > 0 || m.Correlation != "" {
			return nil, invalidField("consumer_group", "consumer groups and correlation need a category subscription")
		}
		sub.next = max(m.GlobalPosition, 1)
	default:
		return nil, invalidField("target", "one of stream, category or all is required")
	}
	return sub, nil
}

// page reads the next messages after sub.next, at most cfg.Page of them
// and cfg.PageBytes of them (at least one), and how far the head is ahead
// of sub.next. A category or whole-namespace page shorter than cfg.Page,
// and not cut short by its byte cap or scan budget, has seen every match
// below the view's head, so the position moves up to the head: a quiet
// category in a busy namespace is not "behind". more is true when the
// read stopped at its scan budget: the position moves up to where it
// stopped, and the caller reads on at once rather than wait for a write.
func (sub *subscription) page(v *fsm.View, cfg subscribeConfig) (msgs []fsm.Message, behind int64, more bool, err error) {
	v.SetPageBytes(cfg.PageBytes)
	v.SetScanBudget(cfg.ScanBudget)
	n := cfg.Page
	switch {
	case sub.stream != "":
		msgs, err = v.ReadStream(fsm.StreamQuery{Stream: sub.stream, Position: sub.next, Limit: n})
		if err == nil {
			var ver int64
			ver, err = v.StreamVersion(sub.stream)
			behind = ver + 1 - sub.next
		}
	default:
		if sub.category != "" {
			msgs, err = v.ReadCategory(fsm.CategoryQuery{Category: sub.category, GlobalPosition: sub.next, Limit: n,
				Correlation: sub.correlation, Member: sub.member, Size: sub.size})
		} else {
			msgs, err = v.ReadAll(sub.next, n)
		}
		if err == nil {
			// All of the namespace's messages count: an upper bound for a
			// category subscriber.
			var head int64
			head, err = v.NextGlobalPosition()
			next := sub.next
			if len(msgs) > 0 {
				next = msgs[len(msgs)-1].GlobalPosition + 1
			}
			behind = head - next
			resume, stopped := v.ScanStopped()
			switch {
			case stopped:
				sub.skipTo, more = resume, true
			case err == nil && len(msgs) < n && !v.PageCapped():
				sub.skipTo = head
			}
		}
	}
	return msgs, behind, more, err
}

// positions is page for a subscriber that sends only where each message
// is (EventoDB's pokes): the same positions in the same steps, read
// without the messages' payloads (fsm.View.ReadPositions).
func (sub *subscription) positions(v *fsm.View, cfg subscribeConfig) (out []fsm.Position, more bool, err error) {
	v.SetPageBytes(cfg.PageBytes)
	v.SetScanBudget(cfg.ScanBudget)
	out, err = v.ReadPositions(fsm.PositionsQuery{Stream: sub.stream, Category: sub.category, From: sub.next,
		Limit: cfg.Page, Member: sub.member, Size: sub.size})
	if err != nil || sub.stream != "" {
		return out, false, err
	}
	head, err := v.NextGlobalPosition()
	resume, stopped := v.ScanStopped()
	switch {
	case stopped:
		sub.skipTo, more = resume, true
	case err == nil && len(out) < cfg.Page && !v.PageCapped():
		sub.skipTo = head
	}
	return out, more, err
}

func (sub *subscription) advance(m *fsm.Message) {
	sub.advanceTo(m.Position, m.GlobalPosition)
}

// advanceTo moves the subscription past the message at stream position
// pos and global position gp.
func (sub *subscription) advanceTo(pos, gp int64) {
	if sub.stream != "" {
		sub.next = pos + 1
	} else {
		sub.next = gp + 1
	}
}

// skip moves a category or namespace position past the stretch the last
// page showed holds no match.
func (sub *subscription) skip() {
	if sub.stream == "" && sub.skipTo > sub.next {
		sub.next = sub.skipTo
	}
	sub.skipTo = 0
}

// Subscribe sends stored matches, then caught_up once, then live matches
// as this node applies them. It never skips or repeats: the feed only
// wakes it, and every message comes from a store read after its position.
func (s *eventStore) Subscribe(ctx context.Context, req *connect.Request[skaldv1.SubscribeRequest], stream *connect.ServerStream[skaldv1.SubscribeResponse]) error {
	return s.subscribe(ctx, req.Msg, stream.Send)
}

// subscribe is Subscribe of m, each response handed to send (which may
// block: the subscription waits, holding at most one page).
func (s *eventStore) subscribe(ctx context.Context, m *skaldv1.SubscribeRequest,
	send func(*skaldv1.SubscribeResponse) error) error {
	stream := sendFunc(send)
	sub, err := newSubscription(m)
	if err != nil {
		return err
	}
	opts, err := readOptions(m.Read)
	if err != nil {
		return err
	}
	ns := callerFrom(ctx).namespace
	w := s.b.Feed().Watch(ns) // before the first read, so no change is missed
	if err := s.b.ReadBarrier(ctx, opts); err != nil {
		return toConnect(ctx, s.log, err)
	}
	cfg := s.sub.withDefaults()
	hold := holdFrom(ctx)
	heartbeat := time.NewTimer(cfg.Heartbeat)
	defer heartbeat.Stop()
	caughtUp := false
	for {
		changed, ended := w.Changed()
		if ended {
			return connect.NewError(connect.CodeNotFound, errors.New("namespace deleted (or the node's state was replaced); resubscribe from your last position"))
		}
		var (
			msgs   []fsm.Message
			behind int64
			more   bool
		)
		// A page holds the reply budget from its read until it is sent.
		if err := hold.reserve(ctx, cfg.PageBytes+replyOverhead); err != nil {
			return s.toConnect(ctx, err)
		}
		_, err := s.b.Read(ctx, ns, nodeapi.ReadOptions{Consistency: nodeapi.Local}, func(v *fsm.View) (err error) {
			msgs, behind, more, err = sub.page(v, cfg)
			hold.keep(v.LastPageBytes() + replyOverhead)
			return err
		})
		if err != nil {
			return s.toConnect(ctx, err)
		}
		if caughtUp && behind > cfg.MaxLag {
			return connect.NewError(connect.CodeResourceExhausted,
				fmt.Errorf("subscriber is %d messages behind (limit %d); resubscribe from your last position", behind, cfg.MaxLag))
		}
		for i := range msgs {
			if err := stream.Send(&skaldv1.SubscribeResponse{Event: &skaldv1.SubscribeResponse_Message{Message: message(&msgs[i])}}); err != nil {
				return err
			}
			sub.advance(&msgs[i])
		}
		hold.release()
		sub.skip()
		if len(msgs) > 0 {
			heartbeat.Reset(cfg.Heartbeat)
			continue
		}
		if more { // a stretch with no match: read on, still sending heartbeats
			select {
			case <-heartbeat.C:
				if err := stream.Send(&skaldv1.SubscribeResponse{Event: &skaldv1.SubscribeResponse_Heartbeat{Heartbeat: &skaldv1.Heartbeat{Time: timestamppb.Now()}}}); err != nil {
					return err
				}
				heartbeat.Reset(cfg.Heartbeat)
			default:
			}
			continue
		}
		if !caughtUp {
			caughtUp = true
			if err := stream.Send(&skaldv1.SubscribeResponse{Event: &skaldv1.SubscribeResponse_CaughtUp{CaughtUp: &skaldv1.CaughtUp{AppliedIndex: s.b.AppliedIndex()}}}); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-heartbeat.C:
			if err := stream.Send(&skaldv1.SubscribeResponse{Event: &skaldv1.SubscribeResponse_Heartbeat{Heartbeat: &skaldv1.Heartbeat{Time: timestamppb.Now()}}}); err != nil {
				return err
			}
			heartbeat.Reset(cfg.Heartbeat)
		case <-ctx.Done():
			return nil
		}
	}
}

// sendFunc is a send function with a stream's Send method.
type sendFunc func(*skaldv1.SubscribeResponse) error

func (f sendFunc) Send(m *skaldv1.SubscribeResponse) error { return f(m) }
