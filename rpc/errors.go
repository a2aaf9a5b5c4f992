package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node"
	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

// toConnect maps an error from the node or the state machine to the
// Connect code the API promises (docs/api.md, Errors).
// Unknown errors become Internal with a generic message; the real one is
// logged, never sent.
func toConnect(ctx context.Context, log *slog.Logger, err error) error {
	var (
		ce *connect.Error
		ve *fsm.ValidationError
		vc *fsm.VersionConflictError
		de *fsm.DuplicateIDError
		vs *fsm.VersionConflictsError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return ce
	case errors.As(err, &de):
		e := connect.NewError(connect.CodeAlreadyExists, errors.New(strings.TrimPrefix(de.Error(), "fsm: ")))
		if d, derr := connect.NewErrorDetail(&skaldv1.DuplicateMessageId{Message: int32(de.Message), Field: de.Field, Id: de.ID, Stream: de.Stream,
			Position: de.Position, GlobalPosition: de.GlobalPosition, Reason: string(de.Reason)}); derr == nil {
			e.AddDetail(d)
		}
		return e
	case errors.As(err, &ve):
		return invalidField(ve.Field, "%s", ve.Reason)
	case errors.As(err, &vs):
		e := connect.NewError(connect.CodeAborted, errors.New(strings.TrimPrefix(vs.Error(), "fsm: ")))
		d := &skaldv1.VersionConflicts{}
		for _, c := range vs.Conflicts {
			d.Conflicts = append(d.Conflicts, &skaldv1.VersionConflict{Stream: c.Stream, ExpectedVersion: c.Expected, ActualVersion: c.Actual})
		}
		if ed, derr := connect.NewErrorDetail(d); derr == nil {
			e.AddDetail(ed)
		}
		return e
	case errors.As(err, &vc):
		e := connect.NewError(connect.CodeAborted, fmt.Errorf("stream %q is at version %d, expected %d", vc.Stream, vc.Actual, vc.Expected))
		if d, derr := connect.NewErrorDetail(&skaldv1.VersionConflict{Stream: vc.Stream, ExpectedVersion: vc.Expected, ActualVersion: vc.Actual}); derr == nil {
			e.AddDetail(d)
		}
		return e
	case errors.Is(err, fsm.ErrNamespaceNotFound):
		return connect.NewError(connect.CodeNotFound, errors.New("namespace not found"))
	case errors.Is(err, fsm.ErrNamespaceExists):
		return connect.NewError(connect.CodeAlreadyExists, errors.New("namespace already exists"))
	case errors.Is(err, fsm.ErrStreamNotFound):
		return connect.NewError(connect.CodeNotFound, errors.New("stream not found: it never had a message"))
	case errors.Is(err, fsm.ErrStreamDeleted):
		return connect.NewError(connect.CodeFailedPrecondition, errors.New("the stream was hard-deleted: it accepts no more writes"))
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, node.ErrStorageFull):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, node.ErrUnknownOutcome):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("the write may or may not have been applied: %w", err))
	case errors.Is(err, node.ErrNoLeader), errors.Is(err, node.ErrNotCaughtUp), errors.Is(err, node.ErrStale),
		errors.Is(err, node.ErrShutdown), errors.Is(err, fsm.ErrClosed):
		return connect.NewError(connect.CodeUnavailable, err)
	}
	log.Error("internal error", "err", err)
	return connect.NewError(connect.CodeInternal, errors.New("internal error"))
}

// invalidField is InvalidArgument with a google.rpc.BadRequest field
// violation.
func invalidField(field, format string, args ...any) *connect.Error {
	desc := fmt.Sprintf(format, args...)
	e := connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %s", field, desc))
	if d, err := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: desc}}}); err == nil {
		e.AddDetail(d)
	}
	return e
}

// ConnectError is the error the API returns for err from the node or the
// state machine: what clients (the chaos harness among them) classify.
func ConnectError(err error) error {
	return toConnect(context.Background(), slog.New(slog.DiscardHandler), err)
}
