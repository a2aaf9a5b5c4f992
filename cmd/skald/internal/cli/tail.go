package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/skalddb/skald/client"
)

// tailStart sets where skald tail's subscription starts: at position when
// given, at the first message with --from-start, else after the last
// message stored (only new messages are printed, as tail -f and
// kubectl logs -f without --since print what comes).
//
// The end of a stream is its version, the end of a category its last
// message's global position (one backward read of the category: a
// credential scoped to it may make it), and the end of the namespace its
// last global position, which lastGlobalPosition finds with reads of one
// message.
func tailStart(ctx context.Context, c *client.Client, sub *client.Subscription, fromStart bool, position optionalInt64, stderr io.Writer) error {
	switch {
	case position.set && sub.Stream != "":
		sub.Position = position.v
		return nil
	case position.set:
		sub.GlobalPosition = max(position.v, 1)
		return nil
	case fromStart && sub.Stream != "":
		sub.Position = 0
		return nil
	case fromStart:
		sub.GlobalPosition = 1
		return nil
	}
	sub.CaughtUp = func() {
		fmt.Fprintln(stderr, "-- caught up at the end (--from-start replays the stored messages); waiting for new messages (Ctrl-C to stop)")
	}
	if sub.Stream != "" {
		v, err := c.StreamVersion(ctx, sub.Stream)
		if err != nil {
			return err
		}
		sub.Position = v + 1 // -1 + 1 = 0 for a stream with no message
		return nil
	}
	if sub.Category != "" {
		msgs, err := c.ReadCategory(ctx, client.CategoryQuery{Category: sub.Category, GlobalPosition: -1, Limit: 1,
			Backward: true})
		if err != nil {
			return fmt.Errorf("find the end of category %q: %w", sub.Category, err)
		}
		sub.GlobalPosition = 1 // a category with no message
		if len(msgs) > 0 {
			sub.GlobalPosition = msgs[0].GlobalPosition + 1
		}
		return nil
	}
	last, err := lastGlobalPosition(ctx, func(ctx context.Context, gp int64) (int64, bool, error) {
		msgs, err := c.ReadAll(ctx, gp, 1)
		if err != nil || len(msgs) == 0 {
			return 0, false, err
		}
		return msgs[0].GlobalPosition, true, nil
	})
	if err != nil {
		return err
	}
	sub.GlobalPosition = last + 1
	return nil
}

// lastGlobalPosition returns the global position of the last message,
// 0 when there is none, given first: the global position of the first
// message at or after gp, if any. It gallops up from the first message,
// doubling its step until it finds nothing, then halves the gap between
// the last message seen and the first position known empty: about
// 2 log2(n) calls of first for a namespace of n positions.
func lastGlobalPosition(ctx context.Context, first func(ctx context.Context, gp int64) (int64, bool, error)) (int64, error) {
	lo, ok, err := first(ctx, 1)
	if err != nil || !ok {
		return 0, err
	}
	// INVARIANT: a message is at lo; once hi > 0, none is at or after hi.
	var hi int64
	// probe asks for the first message at or after at: lo moves up to it
	// if there is one, else hi comes down to at.
	probe := func(at int64) error {
		gp, ok, err := first(ctx, at)
		switch {
		case err != nil:
			return err
		case ok:
			lo = gp
		default:
			hi = at
		}
		return nil
	}
	for step := int64(1); hi == 0; step *= 2 {
		if err := probe(lo + step); err != nil {
			return 0, err
		}
	}
	for hi-lo > 1 {
		if err := probe(lo + (hi-lo)/2); err != nil {
			return 0, err
		}
	}
	return lo, nil
}
