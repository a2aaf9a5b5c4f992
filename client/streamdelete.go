package client

import (
	"context"
	"errors"
	"math"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Retrying a removal whose outcome is unknown.
//
// Removals carry no id the server could deduplicate; a removal is retried
// only when applying it twice removes exactly what applying it once does:
//
//   - TruncateStream(before): the server refuses a bound above the
//     version + 1, so the messages below it exist when the call starts and
//     are the same set on every try.
//   - DeleteByWatermark: the caller names each stream's last position to
//     remove; a repeat removes nothing the caller did not name.
//   - a hard DeleteStream: after the tombstone no message can be appended,
//     so a repeat removes nothing more (and answers 0 deleted).
//   - a soft DeleteStream with an expected version: the delete keeps the
//     version, so a repeat either removes nothing or, when someone appended
//     in between, is refused (and reported as ErrUnknownOutcome).
//
// A soft DeleteStream without an expected version is not retried: a
// repeat after the first try was applied would also remove the messages
// other writers appended in between (acknowledged to them), which the
// caller never saw. It returns ErrUnknownOutcome, as Append did before
// idempotent writes.
//
// A definite refusal of a retry (the stream was hard-deleted or appended
// to in between) does not say whether an earlier try was applied, so it
// is returned as ErrUnknownOutcome wrapping the refusal.

// removalRetry is the retry window of a removal that may be repeated:
// until the caller's context ends.
func removalRetry(context.Context) time.Duration { return math.MaxInt64 }

// DeleteOption changes one DeleteStream.
type DeleteOption func(*deleteSettings)

type deleteSettings struct {
	hard            bool
	expectedVersion *int64
}

// Hard makes DeleteStream leave a tombstone: every later append to or
// truncate of the stream fails with ErrStreamDeleted.
func Hard() DeleteOption { return func(s *deleteSettings) { s.hard = true } }

// ExpectDeleteVersion makes DeleteStream fail with ErrWrongExpectedVersion
// unless the stream is at version v (its last position).
func ExpectDeleteVersion(v int64) DeleteOption {
	return func(s *deleteSettings) { s.expectedVersion = &v }
}

// DeletionResult is what a DeleteStream or TruncateStream removed.
type DeletionResult struct {
	// MessagesDeleted counts the messages this call removed. A retried
	// call whose earlier try was applied counts 0 (the earlier try removed
	// them); so does deleting a tombstone again.
	MessagesDeleted int64
	// Version is the stream's last position, which it keeps: positions
	// are never reused, and a soft-deleted stream's next append lands at
	// Version + 1.
	Version int64
	// Index is the removal's Raft index; the client's session reads wait
	// for it on any node.
	Index uint64
}

// WatermarkDeletionResult is what a DeleteByWatermark removed.
type WatermarkDeletionResult struct {
	MessagesDeleted int64
	// Streams counts the streams that lost at least one message.
	Streams int64
	Index   uint64
}

// DeleteStream removes every message of stream, on the leader. Soft (the
// default): the stream keeps its version and a later append continues at
// the next position. Hard(): a tombstone as well. Reads on any member
// skip the removed messages once the client's session has seen Index.
//
// Errors: ErrNotFound: the stream never had a message.
// ErrWrongExpectedVersion (*WrongExpectedVersionError): the stream is not
// at the version of ExpectDeleteVersion. ErrInvalidArgument: a malformed
// stream name. Nothing was removed by these. ErrUnknownOutcome: it may
// have been removed (a soft delete without an expected version is not
// retried; see the package's notes on removals).
func (c *Client) DeleteStream(ctx context.Context, stream string, opts ...DeleteOption) (DeletionResult, error) {
	var set deleteSettings
	for _, o := range opts {
		o(&set)
	}
	req := &skaldv1.DeleteStreamRequest{Stream: stream, Hard: set.hard, ExpectedVersion: set.expectedVersion}
	var retry func(context.Context) time.Duration
	if set.hard || set.expectedVersion != nil {
		retry = removalRetry
	}
	return c.streamRemoval(ctx, retry, func(ctx context.Context, m *member) (deletionReply, error) {
		r, err := m.events.DeleteStream(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	})
}

// TruncateStream removes the messages of stream whose position is below
// before, on the leader; the stream keeps its version. before may be at
// most the version + 1 (which removes every message). Repeating it
// removes nothing more, so a try whose outcome is unknown is retried.
//
// Errors: ErrNotFound: the stream never had a message. ErrStreamDeleted:
// the stream was hard-deleted. ErrInvalidArgument: before is negative or
// beyond the version + 1, or the name is malformed. Nothing was removed
// by these. ErrUnknownOutcome: a retry was refused after an earlier try
// may have been applied.
func (c *Client) TruncateStream(ctx context.Context, stream string, before int64) (DeletionResult, error) {
	req := &skaldv1.TruncateStreamRequest{Stream: stream, Before: before}
	return c.streamRemoval(ctx, removalRetry, func(ctx context.Context, m *member) (deletionReply, error) {
		r, err := m.events.TruncateStream(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	})
}

// deletionReply is what DeleteStream and TruncateStream answer alike.
type deletionReply interface {
	GetMessagesDeleted() int64
	GetVersion() int64
	GetIndex() uint64
}

// streamRemoval runs a DeleteStream or TruncateStream through removal and
// observes its index.
func (c *Client) streamRemoval(ctx context.Context, retryFor func(context.Context) time.Duration,
	call func(context.Context, *member) (deletionReply, error)) (DeletionResult, error) {
	var resp deletionReply
	err := c.removal(ctx, retryFor, func(ctx context.Context, m *member) error {
		r, err := call(ctx, m)
		if err == nil {
			resp = r
		}
		return err
	})
	if err != nil {
		return DeletionResult{}, err
	}
	c.observe(resp.GetIndex())
	return DeletionResult{MessagesDeleted: resp.GetMessagesDeleted(), Version: resp.GetVersion(), Index: resp.GetIndex()}, nil
}

// DeleteByWatermark removes, in category, every message of each stream of
// watermarks up to its position there (inclusive; beyond the version: up
// to the version), or only the messages of types when given, on the
// leader, as one entry. Streams with nothing to remove are skipped.
// Repeating it removes nothing more than the watermarks name, so a try
// whose outcome is unknown is retried.
//
// Errors: ErrInvalidArgument: a stream outside category, a negative
// position, no stream or too many (10000), too many types (100);
// nothing was removed. ErrUnknownOutcome: it may have been applied.
func (c *Client) DeleteByWatermark(ctx context.Context, category string, watermarks map[string]int64, types ...string) (WatermarkDeletionResult, error) {
	req := &skaldv1.DeleteByWatermarkRequest{Category: category, Watermarks: watermarks, Types: types}
	var resp *skaldv1.DeleteByWatermarkResponse
	err := c.removal(ctx, removalRetry, func(ctx context.Context, m *member) error {
		r, err := m.events.DeleteByWatermark(ctx, connect.NewRequest(req))
		if err == nil {
			resp = r.Msg
		}
		return err
	})
	if err != nil {
		return WatermarkDeletionResult{}, err
	}
	c.observe(resp.Index)
	return WatermarkDeletionResult{MessagesDeleted: resp.MessagesDeleted, Streams: resp.Streams, Index: resp.Index}, nil
}

// removal runs a removal through write (retryFor: see the notes above) and
// turns a definite refusal that follows a try with an unknown outcome into
// ErrUnknownOutcome: the refusal describes the state the retry met, which
// an applied earlier try may have made.
func (c *Client) removal(ctx context.Context, retryFor func(context.Context) time.Duration, try attempt) error {
	maybeApplied := false
	err := c.write(ctx, retryFor, func(ctx context.Context, m *member) error {
		err := try(ctx, m)
		if classify(err) == unknown {
			maybeApplied = true
		}
		return err
	})
	if err == nil {
		return nil
	}
	err = streamWriteError(err)
	var e *Error
	if maybeApplied && !errors.Is(err, ErrUnknownOutcome) && !errors.Is(err, ErrUnavailable) && errors.As(err, &e) {
		// Only the refusal's cause inside: errors.Is must not also find
		// the refusal's kind, which would say nothing was removed.
		return &Error{Kind: ErrUnknownOutcome, Endpoint: e.Endpoint, Err: e.Err}
	}
	return err
}
