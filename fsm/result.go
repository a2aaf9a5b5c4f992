package fsm

import (
	"errors"
	"fmt"
	"strings"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// The wire form of what apply answers (proto/skald/fsm/v1/result.proto):
// apply builds an applied entry's fsmv1.Result itself (each kind's apply
// function answers the member of the Result oneof its row in kinds
// names), the peer service carries it to a follower as it is, and a
// business error travels as an fsmv1.Rejection (RejectionOf, and back with
// RejectionError). The messages' bytes are those of the peer service's
// ApplyResponse they replaced: old and new nodes read each other.

// sentinelReasons are the rejections that carry one of fsm's sentinel
// errors; their message is the error's text (none for bare ones).
var sentinelReasons = []struct {
	reason   fsmv1.Reason
	sentinel error
	bare     bool // sent without a message, decoded as the sentinel itself
}{
	{fsmv1.Reason_REASON_NAMESPACE_NOT_FOUND, ErrNamespaceNotFound, true},
	{fsmv1.Reason_REASON_NAMESPACE_EXISTS, ErrNamespaceExists, true},
	{fsmv1.Reason_REASON_BAD_COMMAND, ErrBadCommand, false},
	{fsmv1.Reason_REASON_STREAM_NOT_FOUND, ErrStreamNotFound, false},
	{fsmv1.Reason_REASON_STREAM_DELETED, ErrStreamDeleted, false},
	{fsmv1.Reason_REASON_GROUP_NOT_FOUND, ErrGroupNotFound, false},
	{fsmv1.Reason_REASON_GROUP_EXISTS, ErrGroupExists, false},
	{fsmv1.Reason_REASON_PARKED_NOT_FOUND, ErrParkedNotFound, false},
	{fsmv1.Reason_REASON_CREDENTIAL_NOT_FOUND, ErrCredentialNotFound, false},
	{fsmv1.Reason_REASON_CREDENTIAL_EXISTS, ErrCredentialExists, false},
	{fsmv1.Reason_REASON_INDEX_EXISTS, ErrIndexExists, false},
	{fsmv1.Reason_REASON_INDEX_NOT_FOUND, ErrIndexNotFound, false},
}

// SentinelRejection is the rejection carrying err, which wraps sentinel,
// under reason: the message is err's text. Packages above fsm use it for
// their own sentinels (RejectionOf covers fsm's).
func SentinelRejection(reason fsmv1.Reason, err error) *fsmv1.Rejection {
	return &fsmv1.Rejection{Reason: reason, Message: err.Error()}
}

// SentinelError is the inverse of SentinelRejection: an error wrapping
// sentinel whose text is the rejection's message (the sentinel's text
// once, however the message began).
func SentinelError(sentinel error, r *fsmv1.Rejection) error {
	return fmt.Errorf("%w: %s", sentinel, strings.TrimPrefix(r.Message, sentinel.Error()+": "))
}

// RejectionOf returns the wire form of err when it is one of the state
// machine's business errors (errors.go), and false otherwise.
func RejectionOf(err error) (*fsmv1.Rejection, bool) {
	var (
		ve *ValidationError
		vc *VersionConflictError
		pe *PositionExistsError
		de *DuplicateIDError
		vs *VersionConflictsError
		cf *ConditionFailedError
		nl *NamespaceLimitError
	)
	switch {
	case errors.As(err, &nl):
		return &fsmv1.Rejection{Reason: fsmv1.Reason_REASON_NAMESPACE_LIMIT, Namespace: nl.Name, Limit: nl.Limit}, true
	case errors.As(err, &cf):
		return &fsmv1.Rejection{Reason: fsmv1.Reason_REASON_CONDITION_FAILED, GlobalPosition: cf.GlobalPosition, Position: cf.After}, true
	case errors.As(err, &de):
		return &fsmv1.Rejection{Reason: fsmv1.Reason_REASON_DUPLICATE_ID, Record: int64(de.Message), Id: de.ID, Stream: de.Stream,
			Position: de.Position, GlobalPosition: de.GlobalPosition, DuplicateReason: string(de.Reason), Field: de.Field}, true
	case errors.As(err, &vs):
		r := &fsmv1.Rejection{Reason: fsmv1.Reason_REASON_VERSION_CONFLICTS}
		for _, c := range vs.Conflicts {
			r.Conflicts = append(r.Conflicts, &fsmv1.StreamConflict{Stream: c.Stream, ExpectedVersion: c.Expected, ActualVersion: c.Actual})
		}
		return r, true
	case errors.As(err, &ve):
		return &fsmv1.Rejection{Reason: fsmv1.Reason_REASON_INVALID, Field: ve.Field, Description: ve.Reason}, true
	case errors.As(err, &vc):
		return &fsmv1.Rejection{Reason: fsmv1.Reason_REASON_VERSION_CONFLICT, Stream: vc.Stream, ExpectedVersion: vc.Expected, ActualVersion: vc.Actual}, true
	case errors.As(err, &pe):
		return &fsmv1.Rejection{Reason: fsmv1.Reason_REASON_POSITION_EXISTS, Record: int64(pe.Record), Stream: pe.Stream,
			Position: pe.Position, GlobalPosition: pe.GlobalPosition, Description: pe.Reason}, true
	}
	for _, s := range sentinelReasons {
		if errors.Is(err, s.sentinel) {
			if s.bare {
				return &fsmv1.Rejection{Reason: s.reason}, true
			}
			return SentinelRejection(s.reason, err), true
		}
	}
	return nil, false
}

// RejectionError is the inverse of RejectionOf; false for a reason that
// is not the state machine's.
func RejectionError(r *fsmv1.Rejection) (error, bool) {
	switch r.Reason {
	case fsmv1.Reason_REASON_INVALID:
		return &ValidationError{Field: r.Field, Reason: r.Description}, true
	case fsmv1.Reason_REASON_VERSION_CONFLICT:
		return &VersionConflictError{Stream: r.Stream, Expected: r.ExpectedVersion, Actual: r.ActualVersion}, true
	case fsmv1.Reason_REASON_DUPLICATE_ID:
		return &DuplicateIDError{Message: int(r.Record), Field: r.Field, ID: r.Id, Stream: r.Stream, Position: r.Position,
			GlobalPosition: r.GlobalPosition, Reason: DuplicateReason(r.DuplicateReason)}, true
	case fsmv1.Reason_REASON_VERSION_CONFLICTS:
		e := &VersionConflictsError{}
		for _, c := range r.Conflicts {
			e.Conflicts = append(e.Conflicts, VersionConflictError{Stream: c.Stream, Expected: c.ExpectedVersion, Actual: c.ActualVersion})
		}
		return e, true
	case fsmv1.Reason_REASON_CONDITION_FAILED:
		return &ConditionFailedError{After: r.Position, GlobalPosition: r.GlobalPosition}, true
	case fsmv1.Reason_REASON_POSITION_EXISTS:
		return &PositionExistsError{Record: int(r.Record), Stream: r.Stream, Position: r.Position, GlobalPosition: r.GlobalPosition, Reason: r.Description}, true
	case fsmv1.Reason_REASON_NAMESPACE_LIMIT:
		return &NamespaceLimitError{Name: r.Namespace, Limit: r.Limit}, true
	}
	for _, s := range sentinelReasons {
		if s.reason == r.Reason {
			if s.bare {
				return s.sentinel, true
			}
			return SentinelError(s.sentinel, r), true
		}
	}
	return nil, false
}
