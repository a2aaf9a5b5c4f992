package client

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Errors callers test with errors.Is. Every error a method returns wraps
// one of them, except the caller's own context error (context.Canceled,
// context.DeadlineExceeded) when nothing was sent.
var (
	// ErrWrongExpectedVersion is returned by Append when the stream's
	// version is not the expected one; nothing was written. errors.As
	// with a *WrongExpectedVersionError gives the actual version.
	ErrWrongExpectedVersion = errors.New("skald: wrong expected version")

	// ErrNotFound is returned when a namespace does not exist.
	ErrNotFound = errors.New("skald: not found")

	// ErrAlreadyExists is returned by Namespaces.Create for a taken name,
	// and by Append for a message id already written with other content.
	ErrAlreadyExists = errors.New("skald: already exists")

	// ErrInvalidArgument is returned for a request the server refused as
	// malformed; *Error.Fields names the offending fields.
	ErrInvalidArgument = errors.New("skald: invalid argument")

	// ErrUnauthenticated is returned for a missing, malformed or unknown
	// token (also when the token's namespace was deleted).
	ErrUnauthenticated = errors.New("skald: unauthenticated")

	// ErrPermissionDenied is returned when the token may not make the call
	// (a namespace token calling an admin-only method).
	ErrPermissionDenied = errors.New("skald: permission denied")

	// ErrResourceExhausted is returned for a message or batch over the
	// server's limits.
	ErrResourceExhausted = errors.New("skald: resource exhausted")

	// ErrStreamDeleted is returned by Append, AppendMulti and
	// TruncateStream for a stream that was hard-deleted (DeleteStream with
	// Hard): it accepts no more writes; nothing was written. The server
	// answers FailedPrecondition; other calls' FailedPrecondition (a
	// cluster call the node cannot serve) stays ErrInvalidArgument.
	ErrStreamDeleted = errors.New("skald: stream deleted")

	// ErrNotInFlight is returned by Ack and Nack when an id is not
	// delivered and unsettled in the group: unknown, already settled, or
	// delivered before the leader changed (it will be delivered again).
	// Nothing was settled.
	ErrNotInFlight = errors.New("skald: not in flight")

	// ErrConditionFailed is returned by Append and AppendMulti with
	// FailIfMatch when a message matching the condition's query exists
	// after its position; nothing was written. errors.As with a
	// *ConditionFailedError gives the first match.
	ErrConditionFailed = errors.New("skald: append condition failed")

	// ErrUnavailable is returned when no member could serve the call
	// within the caller's deadline (no leader, nodes down, a read not
	// caught up). For a write it means nothing was written.
	ErrUnavailable = errors.New("skald: unavailable")

	// ErrUnknownOutcome is returned by a write that may or may not have
	// been applied: it reached a server, then the answer was lost (a node
	// died, leadership changed after the proposal, the deadline passed).
	// Appends are retried with the same ids within the namespace's dedupe
	// window, and removals when a repeat removes nothing more, before
	// this is returned (see DESIGN.md). Look for the messages' ids (every
	// NewMessage gets one before the first try) in the stream to find
	// out.
	ErrUnknownOutcome = errors.New("skald: write outcome unknown")

	// ErrInternal is returned when a server failed in a way the API does
	// not name (Connect Internal, Unknown, Unimplemented, DataLoss).
	ErrInternal = errors.New("skald: internal server error")

	// ErrClosed is returned by calls on a closed Client.
	ErrClosed = errors.New("skald: client closed")
)

// Error is a failure reported by a server or on the way to one. It wraps
// one of the sentinel errors above (Kind) and the underlying error
// (*connect.Error, a network error), so both errors.Is and errors.As see
// through it.
type Error struct {
	// Kind is the sentinel error this is.
	Kind error
	// Endpoint is the API address of the member that answered (or did not).
	Endpoint string
	// Fields are the field violations of an ErrInvalidArgument.
	Fields []FieldViolation
	// Err is the underlying error.
	Err error
}

// FieldViolation names one bad field of a request, by proto name with
// indexes ("messages[0].data").
type FieldViolation struct {
	Field, Description string
}

// Error reads "skald: not found (http://10.0.0.1:8080): not_found:
// namespace not found". It names the member once: not again in
// parentheses when the cause already does ("skald: unavailable:
// unavailable: dial tcp 10.0.0.1:8080: connect: connection refused").
// The server's message already names the fields of an
// ErrInvalidArgument.
func (e *Error) Error() string {
	if e.Endpoint == "" || e.Err != nil && strings.Contains(e.Err.Error(), hostOf(e.Endpoint)) {
		return fmt.Sprintf("%v: %v", e.Kind, e.Err)
	}
	return fmt.Sprintf("%v (%s): %v", e.Kind, e.Endpoint, e.Err)
}

// hostOf is the host:port of an endpoint URL ("http://10.0.0.1:8080").
func hostOf(endpoint string) string {
	if _, rest, ok := strings.Cut(endpoint, "://"); ok {
		return rest
	}
	return endpoint
}

func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

// WrongExpectedVersionError details an ErrWrongExpectedVersion; it wraps
// the server's *Error.
type WrongExpectedVersionError struct {
	Stream   string
	Expected int64
	// Actual is the stream's version when the append was refused (-1: the
	// stream has no message).
	Actual int64
	err    error
}

func (e *WrongExpectedVersionError) Error() string {
	return fmt.Sprintf("skald: stream %q is at version %d, expected %d", e.Stream, e.Actual, e.Expected)
}

// Is makes errors.Is(err, ErrWrongExpectedVersion) hold.
func (e *WrongExpectedVersionError) Is(target error) bool { return target == ErrWrongExpectedVersion }

func (e *WrongExpectedVersionError) Unwrap() error { return e.err }

// WrongExpectedVersionsError details an ErrWrongExpectedVersion of
// AppendMulti: every stream whose version was not the expected one. It
// wraps the server's *Error.
type WrongExpectedVersionsError struct {
	Conflicts []WrongExpectedVersionError
	err       error
}

func (e *WrongExpectedVersionsError) Error() string {
	s := "skald: expected versions do not match:"
	for _, c := range e.Conflicts {
		s += fmt.Sprintf(" stream %q is at version %d, expected %d;", c.Stream, c.Actual, c.Expected)
	}
	return s[:len(s)-1]
}

// Is makes errors.Is(err, ErrWrongExpectedVersion) hold.
func (e *WrongExpectedVersionsError) Is(target error) bool { return target == ErrWrongExpectedVersion }

func (e *WrongExpectedVersionsError) Unwrap() error { return e.err }

// ConditionFailedError details an ErrConditionFailed; it wraps the
// server's *Error.
type ConditionFailedError struct {
	// GlobalPosition is the first message after After that matches the
	// condition's query.
	GlobalPosition int64
	After          int64
	err            error
}

func (e *ConditionFailedError) Error() string {
	return fmt.Sprintf("skald: append condition failed: message at global position %d matches the query and is after %d", e.GlobalPosition, e.After)
}

// Is makes errors.Is(err, ErrConditionFailed) hold.
func (e *ConditionFailedError) Is(target error) bool { return target == ErrConditionFailed }

func (e *ConditionFailedError) Unwrap() error { return e.err }

// kindOf maps a Connect code to the sentinel the API promises for it
// (spec: Errors). Unavailable, DeadlineExceeded and Canceled become
// ErrUnavailable: the caller may retry.
func kindOf(code connect.Code) error {
	switch code {
	case connect.CodeAborted:
		return ErrWrongExpectedVersion
	case connect.CodeNotFound:
		return ErrNotFound
	case connect.CodeAlreadyExists:
		return ErrAlreadyExists
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		return ErrInvalidArgument
	case connect.CodeUnauthenticated:
		return ErrUnauthenticated
	case connect.CodePermissionDenied:
		return ErrPermissionDenied
	case connect.CodeResourceExhausted:
		return ErrResourceExhausted
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeUnimplemented, connect.CodeDataLoss:
		return ErrInternal
	}
	return ErrUnavailable
}

// streamWriteError makes the FailedPrecondition of a write to a stream
// ErrStreamDeleted: the one refusal the API gives that code on these
// calls (a hard-deleted stream).
func streamWriteError(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrInvalidArgument && connect.CodeOf(e.Err) == connect.CodeFailedPrecondition {
		e.Kind = ErrStreamDeleted
	}
	return err
}

// settleError makes the FailedPrecondition of Ack and Nack ErrNotInFlight.
func settleError(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrInvalidArgument && connect.CodeOf(e.Err) == connect.CodeFailedPrecondition {
		e.Kind = ErrNotInFlight
	}
	return err
}

// serverError turns a definite refusal from a server into the client's
// error: the sentinel, the field violations, the version conflict.
func serverError(endpoint string, ce *connect.Error) error {
	e := &Error{Kind: kindOf(ce.Code()), Endpoint: endpoint, Err: ce}
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			continue
		}
		switch v := v.(type) {
		case *errdetails.BadRequest:
			for _, f := range v.FieldViolations {
				e.Fields = append(e.Fields, FieldViolation{Field: f.Field, Description: f.Description})
			}
		case *skaldv1.VersionConflict:
			return &WrongExpectedVersionError{Stream: v.Stream, Expected: v.ExpectedVersion, Actual: v.ActualVersion, err: e}
		case *skaldv1.VersionConflicts:
			w := &WrongExpectedVersionsError{err: e}
			for _, c := range v.Conflicts {
				w.Conflicts = append(w.Conflicts, WrongExpectedVersionError{Stream: c.Stream, Expected: c.ExpectedVersion, Actual: c.ActualVersion})
			}
			return w
		case *skaldv1.ConditionFailed:
			e.Kind = ErrConditionFailed
			return &ConditionFailedError{GlobalPosition: v.GlobalPosition, After: v.After, err: e}
		}
	}
	return e
}
