package rpc

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/nstoken"
)

// caller is who a request acts for: the token's namespace, and whether the
// token is the admin token.
type caller struct {
	namespace string
	admin     bool
}

type callerKey struct{}

func callerFrom(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// tokenChecker resolves bearer tokens against the namespace registry.
type tokenChecker interface {
	Namespace(name string) (fsm.NamespaceInfo, bool)
	LinearizableIndex(ctx context.Context) (uint64, error)
}

type authenticator struct {
	b   tokenChecker
	log *slog.Logger
}

// bearer extracts the token of an Authorization header.
func bearer(h http.Header) (string, error) {
	v := h.Get("Authorization")
	if v == "" {
		return "", errors.New("missing Authorization: Bearer <token>")
	}
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", errors.New("Authorization must be Bearer <token>")
	}
	return strings.TrimSpace(token), nil
}

// check returns the caller a token belongs to. A namespace this node does
// not know yet (created through another node a moment ago), or whose token
// does not match (re-created), is looked up again after catching up with
// the leader: a namespace is usable on every node once its creation is
// acknowledged.
func (a authenticator) check(ctx context.Context, token string) (caller, error) {
	name, err := nstoken.Parse(token)
	if err != nil {
		return caller{}, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("malformed token: %w", err))
	}
	c, ok, err := lookupToken(ctx, a.b, name, token)
	if err != nil {
		return caller{}, toConnect(ctx, a.log, err)
	}
	if !ok {
		return caller{}, connect.NewError(connect.CodeUnauthenticated, errors.New("unknown namespace or wrong token"))
	}
	return c, nil
}

// lookupToken finds the caller of a well-formed token of namespace name.
// ok is false for an unknown namespace or a wrong secret; err reports a
// failed catch-up with the leader.
func lookupToken(ctx context.Context, b tokenChecker, name, token string) (c caller, ok bool, err error) {
	hash := nstoken.Hash(token)
	for attempt := 0; attempt < 2; attempt++ {
		if info, found := b.Namespace(name); found && subtle.ConstantTimeCompare(info.TokenHash, hash) == 1 {
			return caller{namespace: name, admin: name == nstoken.AdminNamespace}, true, nil
		}
		if attempt == 0 {
			if _, err := b.LinearizableIndex(ctx); err != nil {
				return caller{}, false, err
			}
		}
	}
	return caller{}, false, nil
}

func (a authenticator) authenticate(ctx context.Context, h http.Header) (context.Context, error) {
	token, err := bearer(h)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, err)
	}
	c, err := a.check(ctx, token)
	if err != nil {
		return nil, err
	}
	return context.WithValue(ctx, callerKey{}, c), nil
}

// beforeBody authenticates each call of a skald.v1 service from its
// headers before connect-go reads the body: a caller without a valid
// token is answered at once, in its protocol, and its body is never read
// or buffered (net/http then closes an HTTP/1.1 connection whose body is
// left unread). The caller goes on the request's context, where the
// interceptor finds it. Refusals count in the RPC metrics as the
// interceptor's would.
func (a authenticator) beforeBody(next http.Handler, errw *connect.ErrorWriter, m *rpcMetrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, err := a.authenticate(r.Context(), r.Header)
		if err != nil {
			m.observe(r.URL.Path, start, err)
			w.Header().Set("Connection", "close")
			_ = errw.Write(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// admitted returns ctx when beforeBody already authenticated its call,
// else the context authenticate makes from h.
func (a authenticator) admitted(ctx context.Context, h http.Header) (context.Context, error) {
	if _, ok := ctx.Value(callerKey{}).(caller); ok {
		return ctx, nil
	}
	return a.authenticate(ctx, h)
}

// WrapUnary implements connect.Interceptor.
func (a authenticator) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, err := a.admitted(ctx, req.Header())
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient implements connect.Interceptor (servers only).
func (a authenticator) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (a authenticator) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := a.admitted(ctx, conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// requireAdmin fails PermissionDenied unless the caller holds the admin
// token.
func requireAdmin(ctx context.Context) error {
	if !callerFrom(ctx).admin {
		return connect.NewError(connect.CodePermissionDenied, errors.New("this call needs the admin token"))
	}
	return nil
}
