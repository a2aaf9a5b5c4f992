package client

import (
	"errors"
	"io"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/anypb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// What an append's error on a stream means to the retry loop: the
// server's answers as the unary call's, a stream that broke after it
// served as unknown, one the server never served as not sent on it.
func TestStreamErrorsClassify(t *testing.T) {
	detail, _ := anypb.New(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "stream", Description: "empty"}}})
	broken := func(answered bool, cause error) error {
		s := &appendStream{pool: &appendPool{m: &member{url: "http://n1"}}, answered: answered, err: cause}
		return s.endError()
	}
	for _, tc := range []struct {
		name string
		err  error
		want verdict
	}{
		{"invalid argument", streamedError(&skaldv1.AppendStreamError{Code: "invalid_argument", Message: "stream: empty", Details: []*anypb.Any{detail}}, ""), final},
		{"aborted", streamedError(&skaldv1.AppendStreamError{Code: "aborted", Message: "expected version"}, ""), final},
		{"unavailable, not applied", streamedError(&skaldv1.AppendStreamError{Code: "unavailable", Message: "node: no leader", NotApplied: true}, ""), refused},
		{"unavailable", streamedError(&skaldv1.AppendStreamError{Code: "unavailable", Message: "the write may or may not have been applied"}, ""), unknown},
		{"deadline, not applied", streamedError(&skaldv1.AppendStreamError{Code: "deadline_exceeded", NotApplied: true}, ""), refused},
		{"stream reset after answers", broken(true, connect.NewError(connect.CodeUnavailable, io.ErrUnexpectedEOF)), unknown},
		{"stream ended by the server, revoked", broken(true, connect.NewWireError(connect.CodeUnauthenticated, errors.New("revoked"))), final},
		{"stream ended by the server, idle", broken(true, connect.NewWireError(connect.CodeUnavailable, errors.New("i/o timeout"))), refused},
		{"stream refused at its opening", broken(false, connect.NewWireError(connect.CodePermissionDenied, errors.New("reader"))), final},
		{"stream ended Unimplemented after answers", broken(true, connect.NewError(connect.CodeUnimplemented, errors.New("x"))), unknown},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("%s: %v classified %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	for _, cause := range []error{connect.NewError(connect.CodeUnimplemented, errors.New("HTTP/1.1")), connect.NewError(connect.CodeUnknown, errors.New("HTTP status 505 HTTP Version Not Supported"))} {
		if err := broken(false, cause); !errors.Is(err, errNoStream) {
			t.Errorf("%v before any answer: %v, want errNoStream", cause, err)
		}
	}
	e := streamedError(&skaldv1.AppendStreamError{Code: "invalid_argument", Message: "stream: empty", Details: []*anypb.Any{detail}}, "n2:8080")
	var ce *connect.Error
	if !errors.As(e, &ce) || ce.Message() != "stream: empty" || len(ce.Details()) != 1 || ce.Meta().Get(leaderHeader) != "n2:8080" || !connect.IsWireError(e) {
		t.Errorf("rebuilt error %v: message %q, %d details, leader %q", e, ce.Message(), len(ce.Details()), ce.Meta().Get(leaderHeader))
	}
}
