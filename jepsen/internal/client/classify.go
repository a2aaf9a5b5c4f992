package client

import (
	"errors"
	"syscall"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/jepsen/internal/history"
)

// Classify says what a completed call lets the checker assume.
//
// Reads have no effect, so every read error is Fail. A write (an append, a
// truncate or a stream delete) is Fail only
// when the server promises nothing was written: a version conflict
// (Aborted), a rejected request (InvalidArgument, NotFound,
// Unauthenticated, PermissionDenied, AlreadyExists, FailedPrecondition,
// OutOfRange, ResourceExhausted), or a connection that was refused before
// anything was sent. Everything else — Unavailable (no leader and unknown
// outcome share it), DeadlineExceeded, Canceled, Internal, a reset
// connection — is Info: the write may or may not have been applied.
func Classify(f string, err error) history.Type {
	if err == nil {
		return history.OK
	}
	if !history.MayApply(f) {
		return history.Fail
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return history.Fail
	}
	switch connect.CodeOf(err) {
	case connect.CodeAborted, connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeUnauthenticated,
		connect.CodePermissionDenied, connect.CodeAlreadyExists, connect.CodeFailedPrecondition,
		connect.CodeOutOfRange, connect.CodeResourceExhausted:
		return history.Fail
	}
	return history.Info
}

// conflictActual returns the stream version a version conflict reported.
func conflictActual(err error) (int64, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeAborted {
		return 0, false
	}
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			continue
		}
		if vc, ok := v.(*skaldv1.VersionConflict); ok {
			return vc.ActualVersion, true
		}
	}
	return 0, false
}

// conditionMatch returns the first match a failed append condition
// reported.
func conditionMatch(err error) (int64, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
		return 0, false
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if cf, ok := v.(*skaldv1.ConditionFailed); ok {
				return cf.GlobalPosition, true
			}
		}
	}
	return 0, false
}
