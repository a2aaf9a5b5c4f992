package kurrentdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"connectrpc.com/connect"
)

// invalid is InvalidArgument saying what was wrong.
func invalid(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

// received is the error of a request stream that ended before what
// was expected: its own error, or InvalidArgument when it ended
// cleanly.
func received(err error, what string) error {
	if err == nil || errors.Is(err, io.EOF) {
		return invalid("the request ended before %s", what)
	}
	return err
}

// fromSkald is err of Skald's API (a *connect.Error, code and details
// kept) with what was done in front of its message, and KurrentDB's
// exception trailer where it has one.
func fromSkald(err error, format string, args ...any) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return connect.NewError(connect.CodeInternal, fmt.Errorf(format+": %w", append(args, err)...))
	}
	out := connect.NewError(ce.Code(), fmt.Errorf(format+": %s", append(args, ce.Message())...))
	for _, d := range ce.Details() {
		out.AddDetail(d)
	}
	for k, v := range ce.Meta() {
		out.Meta()[k] = v
	}
	return withException(out)
}

// streamDeleted is KurrentDB's error for a hard-deleted (tombstoned)
// stream: FailedPrecondition with the exception trailer and its
// companion stream-name, which the clients read without checking that
// it is there.
func streamDeleted(name string) error {
	err := connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("stream %q was hard-deleted", name))
	err.Meta().Set("exception", "stream-deleted")
	err.Meta().Set("stream-name", name)
	return err
}

// jsonObject reports whether b is one valid JSON object.
func jsonObject(b []byte) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal(b, &v) == nil && v != nil
}
