package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"connectrpc.com/connect"
)

// attempt is one try of a call on one member.
type attempt func(ctx context.Context, m *member) error

// writeReply is write (retryFor: see write) for one unary call whose
// answer carries the Raft index it was applied at: it returns the answer
// of the attempt that succeeded, and the session's reads observe its
// index.
func writeReply[T any, PT interface {
	*T
	GetIndex() uint64
}](ctx context.Context, c *Client, retryFor func(context.Context) time.Duration, call func(ctx context.Context, m *member) (*connect.Response[T], error)) (PT, error) {
	var out PT
	err := c.write(ctx, retryFor, func(ctx context.Context, m *member) error {
		r, err := call(ctx, m)
		if err == nil {
			out = r.Msg
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	c.observe(out.GetIndex())
	return out, nil
}

// write runs a call with side effects: on the leader when known, moving
// on when a member cannot be reached or refuses before proposing, until
// one answers for good or ctx ends. A write that may have been applied
// returns ErrUnknownOutcome, unless it is idempotent: retryFor, when not
// nil and c.retryUnknown, says for how long after the first attempt such
// a write may be sent again (asked only when an outcome is unknown).
func (c *Client) write(ctx context.Context, retryFor func(context.Context) time.Duration, try attempt) error {
	if c.closed.Load() {
		return ErrClosed
	}
	start := time.Now()
	at := attempts{forWrite: true, tried: map[*member]bool{}}
	for {
		m, err := at.next(ctx, c)
		if err != nil {
			return err
		}
		err = try(ctx, m)
		v := classify(err)
		if v == unknown && (ctx.Err() != nil || c.closed.Load()) {
			// Cut off by the caller's context or Close, maybe after it was
			// sent.
			return &Error{Kind: ErrUnknownOutcome, Endpoint: m.url, Err: err}
		}
		switch v {
		case final:
			return at.answered(c, m, err)
		case notSent:
			c.view.failed(m)
			c.disc.soon()
		case refused:
			c.view.refusedWrite(m)
			c.disc.soon()
			if pause(ctx, 0) != nil {
				return c.gaveUp(ctx, m, err, at.maybeApplied)
			}
		case unknown:
			if !c.retryUnknown || retryFor == nil || time.Since(start) >= retryFor(ctx) {
				return &Error{Kind: ErrUnknownOutcome, Endpoint: m.url, Err: err}
			}
			at.maybeApplied = true
			c.view.failed(m)
			c.disc.soon()
		}
		at.last, at.lastM = err, m
	}
}

// read runs a call without side effects on the members in turn, each
// attempt bounded by Config.ReadAttemptTimeout, until one answers for good
// or ctx ends.
func (c *Client) read(ctx context.Context, try attempt) error {
	return c.readAs(ctx, attempts{tried: map[*member]bool{}}, try)
}

// internalRead is read for what the client asks on its own behalf in the
// middle of a caller's call (retryWindow's namespace lookup): Config.Observe
// is not told of it, so it still sees one member per call.
func (c *Client) internalRead(ctx context.Context, try attempt) error {
	return c.readAs(ctx, attempts{tried: map[*member]bool{}, internal: true}, try)
}

func (c *Client) readAs(ctx context.Context, at attempts, try attempt) error {
	if c.closed.Load() {
		return ErrClosed
	}
	for {
		m, err := at.next(ctx, c)
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, c.attemptTimeout(ctx))
		err = try(actx, m)
		cancel()
		if err != nil && ctx.Err() != nil {
			return c.gaveUp(ctx, m, err, false)
		}
		switch readVerdict(err) {
		case final:
			return at.answered(c, m, err)
		case notSent:
			c.view.failed(m)
			c.disc.soon()
		default:
			if !connect.IsWireError(err) {
				c.view.failed(m) // lost on the way or hung: not answering
				c.disc.soon()
			}
		}
		at.last, at.lastM = err, m
	}
}

// attempts is where one call stands among the members: each is tried
// once a round, and a round that found none left pauses before the next.
type attempts struct {
	forWrite     bool
	tried        map[*member]bool
	round        int
	last         error   // the last attempt's error
	lastM        *member // the member that answered it
	maybeApplied bool    // an earlier attempt may have been applied
	internal     bool    // the client's own call: not told to Config.Observe
}

// next is the member to try now. Its error is the call's own: all tried
// under Config.FailFast, or ctx ended while pausing between rounds.
func (a *attempts) next(ctx context.Context, c *Client) (*member, error) {
	for {
		if m := c.view.pick(a.forWrite, a.tried); m != nil {
			a.tried[m] = true
			return m, nil
		}
		if c.cfg.FailFast && a.last != nil {
			return nil, exhausted(a.lastM, a.last, a.maybeApplied)
		}
		if err := pause(ctx, a.round); err != nil {
			return nil, c.gaveUp(ctx, a.lastM, a.last, a.maybeApplied)
		}
		a.round++
		clear(a.tried)
	}
}

// answered ends the call m answered for good: nil if it succeeded (m is
// remembered as the member that serves), else the server's error.
func (a *attempts) answered(c *Client, m *member, err error) error {
	if err != nil {
		return serverError(m.url, asConnect(err))
	}
	c.view.answered(m, a.forWrite)
	if !a.internal {
		c.served(m)
	}
	return nil
}

// attemptTimeout bounds one read attempt: Config.ReadAttemptTimeout, and
// under a caller's deadline at most half of the time left (but 100 ms at
// least), so a member that hangs leaves time to ask another.
func (c *Client) attemptTimeout(ctx context.Context) time.Duration {
	d := c.cfg.ReadAttemptTimeout
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(deadline)/2, 100*time.Millisecond))
	}
	return d
}

// gaveUp is the error of a call whose context ended between attempts.
func (c *Client) gaveUp(ctx context.Context, m *member, last error, maybeApplied bool) error {
	url := ""
	if m != nil {
		url = m.url
	}
	kind := ErrUnavailable
	if maybeApplied {
		kind = ErrUnknownOutcome
	}
	err := ctx.Err()
	if last != nil {
		err = fmt.Errorf("%w; last attempt: %w", err, last)
	}
	return &Error{Kind: kind, Endpoint: url, Err: err}
}

// exhausted is the error of a FailFast call that tried every member: it
// wraps the last attempt's error itself, so that errors.As finds its cause.
func exhausted(m *member, last error, maybeApplied bool) error {
	kind := ErrUnavailable
	if maybeApplied {
		kind = ErrUnknownOutcome
	}
	return &Error{Kind: kind, Endpoint: m.url, Err: last}
}

// pause waits before the next round of attempts: 20 ms doubling to
// 640 ms, with jitter so that clients do not move in step.
func pause(ctx context.Context, round int) error {
	d := 20 * time.Millisecond << min(round, 5)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
