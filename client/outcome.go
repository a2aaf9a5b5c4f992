package client

import (
	"errors"
	"net"
	"strings"
	"syscall"

	"connectrpc.com/connect"
)

// idempotentWrites is the one switch for retrying appends whose outcome is
// unknown. Skald servers deduplicate the message ids clients give (issue
// #18): an append of ids already written, within the namespace's dedupe
// window, returns the original positions and writes nothing. So an append
// that may have been applied is retried with the same ids, for as long as
// the namespace's window allows (retryWindow, dedupe.go): never against a
// namespace with dedupe off or a server too old to report its window.
// Namespace and cluster writes are never retried on an unknown outcome.
const idempotentWrites = true

// verdict is what one attempt's error means for the call.
type verdict int

const (
	// final: success, or a definite answer from a server (nothing was
	// written on a refusal); return it.
	final verdict = iota
	// notSent: the request never reached a server (it could not be
	// dialled). Try another member at once; this one is down.
	notSent
	// refused: a server refused before proposing anything (no leader yet,
	// leadership transfer in progress, shutting down, a read not caught
	// up). Retry after a pause, on another member for a read.
	refused
	// unknown: the request reached a server and the answer was lost or
	// says the write may have been applied. A read retries; an append
	// retries within its namespace's dedupe window (idempotentWrites).
	unknown
)

// outcomeHeader is the error metadata in which a server says what became
// of a write it refused (rpc.OutcomeHeader); outcomeNotApplied: nothing
// was proposed, so sending it again cannot apply it twice.
const (
	outcomeHeader     = "Skald-Outcome"
	outcomeNotApplied = "not-applied"
)

// notProposed is the fallback for servers older than outcomeHeader: the
// messages of an Unavailable write that certainly proposed nothing:
// nodeapi.ErrNoLeader, nodeapi.ErrShutdown (the write path's wait for a
// leader ended) and hashicorp/raft's refusal during a leadership transfer,
// which servers before the issue #16 fix wrap as an unknown outcome
// although raft refused it before the log. Every other unmarked
// Unavailable of a write counts as unknown: a whitelist, so a new server
// message errs on the safe side.
var notProposed = []string{"node: no leader", "node: shut down", "leadership transfer in progress"}

// refusal marks an attempt's error as a definite refusal the client
// recognised itself (a Cluster call on a member that is not the leader).
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// classify judges the error of one attempt.
func classify(err error) verdict {
	if err == nil {
		return final
	}
	if _, ok := err.(*refusal); ok {
		return refused
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return unknown
	}
	if !connect.IsWireError(err) {
		if isDialError(err) {
			return notSent
		}
		switch ce.Code() {
		case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeDeadlineExceeded, connect.CodeCanceled, connect.CodeInternal:
			return unknown
		}
		return final // the client refused to send it (bad input, too large)
	}
	switch ce.Code() {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded:
		if ce.Meta().Get(outcomeHeader) == outcomeNotApplied {
			return refused
		}
	}
	switch ce.Code() {
	case connect.CodeUnavailable:
		msg := ce.Message()
		for _, s := range notProposed {
			if strings.Contains(msg, s) {
				return refused
			}
		}
		return unknown
	case connect.CodeDeadlineExceeded, connect.CodeInternal, connect.CodeUnknown, connect.CodeCanceled:
		return unknown
	}
	return final
}

// readVerdict is classify for calls without side effects: a read lost on
// the way is simply asked again, and any Unavailable (not caught up to
// min_index, too stale, no leader) is worth another member. An Internal
// or Unknown answer from a server is final.
func readVerdict(err error) verdict {
	v := classify(err)
	if v != unknown {
		return v
	}
	if connect.IsWireError(err) {
		switch connect.CodeOf(err) {
		case connect.CodeInternal, connect.CodeUnknown:
			return final
		}
	}
	return refused
}

// isDialError reports a connection that could not be made: nothing was
// sent on it.
func isDialError(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
