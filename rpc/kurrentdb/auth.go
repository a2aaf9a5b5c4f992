package kurrentdb

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/rpc"
)

// callerKey carries the rpc.Caller beforeBody admitted.
type callerKey struct{}

// callerFrom is the caller beforeBody put on ctx; ok false means none
// (a handler called without it refuses the call).
func callerFrom(ctx context.Context) (rpc.Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(rpc.Caller)
	return c, ok
}

// leastProcedure is the Skald procedure whose role a KurrentDB method
// needs at least, checked before its body is read; what its request
// touches is checked again with the request (rpc.Local).
var leastProcedure = map[string]string{
	appendProcedure:    skaldv1connect.EventStoreAppendProcedure,
	readProcedure:      skaldv1connect.EventStoreReadStreamProcedure,
	deleteProcedure:    skaldv1connect.EventStoreDeleteStreamProcedure,
	tombstoneProcedure: skaldv1connect.EventStoreDeleteStreamProcedure,

	psCreateProcedure:       skaldv1connect.SubscriptionsCreateGroupProcedure,
	psUpdateProcedure:       skaldv1connect.SubscriptionsUpdateGroupProcedure,
	psDeleteProcedure:       skaldv1connect.SubscriptionsDeleteGroupProcedure,
	psReadProcedure:         skaldv1connect.SubscriptionsConsumeProcedure,
	psGetInfoProcedure:      skaldv1connect.SubscriptionsGetGroupProcedure,
	psReplayParkedProcedure: skaldv1connect.SubscriptionsReplayParkedProcedure,
	psListProcedure:         skaldv1connect.SubscriptionsListGroupsProcedure,
	psRestartProcedure:      skaldv1connect.SubscriptionsUpdateGroupProcedure,
}

// Bounds of the body a refused call may still send before its refusal
// (discard).
const (
	discardBytes = 1 << 20
	discardTime  = 2 * time.Second
)

// beforeBody admits each call of path from its headers before connect-go
// reads the body: a caller without valid credentials, or whose role may
// not call the method, is refused without its body being decoded.
func (s *Server) beforeBody(path string, next http.Handler, errw *connect.ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		c, err := s.admit(r.Context(), r.Header)
		if err == nil {
			err = s.local.Permit(c, leastProcedure[path])
		}
		if err != nil {
			discard(w, r)
			s.metrics.observe(path, start, err)
			recordOutcome(r.Context(), err)
			_ = errw.Write(w, r, withException(err))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// admit returns the caller of a request's headers: the bound namespace
// when the listener authenticates nobody, else the Skald credential of
// its Authorization header, Basic credential-name:token or Bearer token.
func (s *Server) admit(ctx context.Context, h http.Header) (rpc.Caller, error) {
	if s.Insecure() {
		return s.local.Bound(s.opts.Namespace), nil
	}
	v := h.Get("Authorization")
	if v == "" {
		return rpc.Caller{}, connect.NewError(connect.CodeUnauthenticated, errors.New(
			"no credentials: send Basic <credential name>:<Skald token> or Bearer <Skald token> "+
				"(the KurrentDB clients send credentials only over TLS)"))
	}
	scheme, rest, _ := strings.Cut(v, " ")
	rest = strings.TrimSpace(rest)
	switch {
	case strings.EqualFold(scheme, "Bearer") && rest != "":
		return s.local.Authenticate(ctx, rest)
	case strings.EqualFold(scheme, "Basic"):
		raw, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return rpc.Caller{}, connect.NewError(connect.CodeUnauthenticated,
				fmt.Errorf("basic credentials are not base64: %w", err))
		}
		user, token, ok := strings.Cut(string(raw), ":")
		if !ok || user == "" || token == "" {
			return rpc.Caller{}, connect.NewError(connect.CodeUnauthenticated,
				errors.New("basic credentials must be <credential name>:<Skald token>"))
		}
		c, err := s.local.Authenticate(ctx, token)
		if err != nil {
			return rpc.Caller{}, err
		}
		if c.Credential() != user {
			// The same answer as a wrong token: the name is half the secret
			// a KurrentDB user gives.
			return rpc.Caller{}, connect.NewError(connect.CodeUnauthenticated, errors.New("unknown user name or wrong token"))
		}
		return c, nil
	default:
		return rpc.Caller{}, connect.NewError(connect.CodeUnauthenticated,
			errors.New("authorization must be Basic <credential name>:<Skald token> or Bearer <Skald token>"))
	}
}

// withException adds the trailer KurrentDB's clients read an error's
// kind from, where KurrentDB sends one: access-denied on
// PermissionDenied.
func withException(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	if ce.Code() == connect.CodePermissionDenied && ce.Meta().Get("exception") == "" {
		ce.Meta().Set("exception", "access-denied")
	}
	return ce
}

// discard reads what a refused call sends, at most discardBytes for at
// most discardTime, and throws it away undecoded. The clients send a
// whole client stream before they read the answer, and report a stream
// that the server ended under their sends as a broken connection (EOF)
// rather than the refusal: so the refusal waits for the body, within
// bounds.
func discard(w http.ResponseWriter, r *http.Request) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(discardTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, discardBytes))
}
