package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"connectrpc.com/connect"
)

// TestClassify pins what each kind of failure means for a write and a read:
// the whitelist of refusals that certainly proposed nothing, and that
// everything else sent to a server is an unknown outcome for a write.
func TestClassify(t *testing.T) {
	dial := connect.NewError(connect.CodeUnavailable, fmt.Errorf("post: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}))
	reset := connect.NewError(connect.CodeUnavailable, fmt.Errorf("post: %w", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}))
	wire := func(code connect.Code, msg string) error { return connect.NewWireError(code, errors.New(msg)) }
	marked := func(code connect.Code, msg string) error {
		e := connect.NewWireError(code, errors.New(msg))
		e.Meta().Set(outcomeHeader, outcomeNotApplied)
		return e
	}
	tests := []struct {
		name        string
		err         error
		write, read verdict
	}{
		{"ok", nil, final, final},
		{"dial_refused", dial, notSent, notSent},
		{"connection_reset", reset, unknown, refused},
		{"caller_deadline", connect.NewError(connect.CodeDeadlineExceeded, context.DeadlineExceeded), unknown, refused},
		// The server's marker decides, whatever the message says.
		{"marked_not_applied", marked(connect.CodeUnavailable, "node: no quorum for 3s"), refused, refused},
		{"marked_past_deadline", marked(connect.CodeDeadlineExceeded, "node: no leader"), refused, refused},
		{"marked_storage_full", marked(connect.CodeResourceExhausted, "node: storage full"), final, final},
		// Servers without the marker: the messages known to mean it.
		{"no_leader", wire(connect.CodeUnavailable, "node: no leader"), refused, refused},
		{"shut_down", wire(connect.CodeUnavailable, "node: shut down"), refused, refused},
		{"transfer_in_progress", wire(connect.CodeUnavailable, "the write may or may not have been applied: node: write outcome unknown: leadership transfer in progress"), refused, refused},
		{"leadership_lost", wire(connect.CodeUnavailable, "the write may or may not have been applied: node: write outcome unknown: leadership lost while committing log"), unknown, refused},
		{"not_caught_up", wire(connect.CodeUnavailable, "node: not caught up"), unknown, refused},
		{"server_deadline", wire(connect.CodeDeadlineExceeded, "context deadline exceeded"), unknown, refused},
		{"internal", wire(connect.CodeInternal, "internal error"), unknown, final},
		{"version_conflict", wire(connect.CodeAborted, "stream is at version 3"), final, final},
		{"invalid", wire(connect.CodeInvalidArgument, "stream: empty"), final, final},
		{"not_the_leader", &refusal{wire(connect.CodeFailedPrecondition, "call the leader")}, refused, refused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.write {
				t.Errorf("classify = %d, want %d", got, tc.write)
			}
			if got := readVerdict(tc.err); got != tc.read {
				t.Errorf("readVerdict = %d, want %d", got, tc.read)
			}
		})
	}
}

// TestServerErrorKinds checks the sentinel and details of a server's
// refusal.
func TestServerErrorKinds(t *testing.T) {
	for code, want := range map[connect.Code]error{
		connect.CodeAborted:          ErrWrongExpectedVersion,
		connect.CodeNotFound:         ErrNotFound,
		connect.CodeAlreadyExists:    ErrAlreadyExists,
		connect.CodeInvalidArgument:  ErrInvalidArgument,
		connect.CodeUnauthenticated:  ErrUnauthenticated,
		connect.CodePermissionDenied: ErrPermissionDenied,
		connect.CodeUnavailable:      ErrUnavailable,
		connect.CodeInternal:         ErrInternal,
	} {
		ce := connect.NewWireError(code, errors.New("x"))
		err := serverError("http://n1", ce)
		if !errors.Is(err, want) {
			t.Errorf("%v: %v is not %v", code, err, want)
		}
		var got *connect.Error
		if !errors.As(err, &got) || got.Code() != code {
			t.Errorf("%v: the *connect.Error is not in the chain of %v", code, err)
		}
	}
}
