package rpc

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
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
	b       tokenChecker
	unknown *unknownTokens // tokens not known here
	log     *slog.Logger
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
	c, ok, err := lookupToken(ctx, a.b, a.unknown, name, token)
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
// failed catch-up with the leader. A token this node does not know is
// looked up again once unknown has caught the node up with the leader,
// unless unknown remembers it from a moment ago.
func lookupToken(ctx context.Context, b tokenChecker, unknown *unknownTokens, name, token string) (c caller, ok bool, err error) {
	hash := nstoken.Hash(token)
	known := func() bool {
		info, found := b.Namespace(name)
		return found && subtle.ConstantTimeCompare(info.TokenHash, hash) == 1
	}
	if known() {
		return caller{namespace: name, admin: name == nstoken.AdminNamespace}, true, nil
	}
	remember := name != nstoken.AdminNamespace
	if remember && unknown.remembered(hash) {
		return caller{}, false, nil
	}
	start, err := unknown.catchUp(ctx)
	if err != nil {
		return caller{}, false, err
	}
	if known() {
		return caller{namespace: name, admin: name == nstoken.AdminNamespace}, true, nil
	}
	if remember {
		unknown.remember(hash, start)
	}
	return caller{}, false, nil
}

// unknownTokens spares the leader the round trips of tokens this node
// does not know (a namespace created through another node a moment ago,
// or, far more often, none at all). Before, each such token cost one
// LinearizableIndex, a leader read index, and 2,000 of them 2,000.
//
// Rounds: a token not known here waits for a round, one LinearizableIndex
// that starts after the check arrived (so once it ends the node holds
// every namespace whose creation was acknowledged before the check
// arrived); one round answers every check waiting for it, and rounds
// start at most one per pace. A flood of unknown tokens costs the leader
// at most one read index per pace from this node, however many callers
// send them; a token after a quiet pace is checked at once.
//
// Memory: a token still unknown after a round is remembered until ttl
// after that round started, and answered unknown meanwhile without a
// round (a client repeating a stale token costs one round per ttl). This
// is safe because every namespace create waits createWait (> ttl) after
// it is applied before it is acknowledged (namespaceops.go): a create
// this node's round did not see was committed after the round started,
// so it is acknowledged after the memory of any token it makes valid has
// lapsed. (Without that wait it would not be safe: the leader
// acknowledges a create once a quorum holds it, possibly before this node
// has received it.) The memory holds at most maxUnknown tokens; when it
// is full a token is not remembered, only paced. The admin namespace's
// token is never remembered (it is created by the server at first start,
// without the wait).
type unknownTokens struct {
	leader func(context.Context) (uint64, error) // LinearizableIndex
	pace   time.Duration
	ttl    time.Duration

	mu      sync.Mutex
	next    *tokenRound // checks waiting for a round that has not started
	running bool        // a goroutine is running rounds
	last    time.Time   // when the last round started
	seen    map[[32]byte]time.Time
}

// tokenRound is one catch-up and the checks it answers.
type tokenRound struct {
	done  chan struct{}
	start time.Time
	err   error
}

const (
	// roundTimeout bounds one round; it serves many callers, so no
	// caller's context.
	roundTimeout = 10 * time.Second
	// maxUnknown bounds the remembered unknown tokens.
	maxUnknown = 4096
)

func newUnknownTokens(leader func(context.Context) (uint64, error), pace, ttl time.Duration) *unknownTokens {
	return &unknownTokens{leader: leader, pace: pace, ttl: ttl, seen: make(map[[32]byte]time.Time)}
}

// createWait is how long a namespace create waits after it is applied
// before it is acknowledged: past ttl, with a margin for clocks that tick
// at slightly different rates on different nodes.
func (u *unknownTokens) createWait() time.Duration { return u.ttl + u.ttl/8 }

// waitCreated waits d after a namespace create was applied (createWait),
// or until ctx ends: the create happened either way.
func waitCreated(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// remembered reports whether the token of hash was found unknown by a
// round that started less than ttl ago.
func (u *unknownTokens) remembered(hash []byte) bool {
	key := [32]byte(hash)
	u.mu.Lock()
	defer u.mu.Unlock()
	until, ok := u.seen[key]
	if ok && time.Now().After(until) {
		delete(u.seen, key)
		return false
	}
	return ok
}

// remember records that a round started at start found the token of hash
// unknown.
func (u *unknownTokens) remember(hash []byte, start time.Time) {
	if u.ttl <= 0 {
		return
	}
	key := [32]byte(hash)
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) >= maxUnknown {
		for k, until := range u.seen {
			if now.After(until) {
				delete(u.seen, k)
			}
		}
		if len(u.seen) >= maxUnknown {
			return
		}
	}
	u.seen[key] = start.Add(u.ttl)
}

// catchUp returns once a round that started after the call has ended,
// with the round's start and error.
func (u *unknownTokens) catchUp(ctx context.Context) (time.Time, error) {
	u.mu.Lock()
	r := u.next
	if r == nil {
		r = &tokenRound{done: make(chan struct{})}
		u.next = r
	}
	if !u.running {
		u.running = true
		go u.run()
	}
	u.mu.Unlock()
	select {
	case <-r.done:
		return r.start, r.err
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// run starts one waiting round after another, pace apart, until none
// waits.
func (u *unknownTokens) run() {
	for {
		u.mu.Lock()
		wait := time.Until(u.last.Add(u.pace))
		u.mu.Unlock()
		if wait > 0 {
			time.Sleep(wait) // INVARIANT: only this goroutine starts rounds
		}
		u.mu.Lock()
		r := u.next
		u.next = nil
		if r == nil {
			u.running = false
			u.mu.Unlock()
			return
		}
		r.start = time.Now()
		u.last = r.start
		u.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
		_, r.err = u.leader(ctx)
		cancel()
		close(r.done)
	}
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
