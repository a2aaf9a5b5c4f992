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

	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/rpc/evdb"
)

// caller is who a request acts for: the credential that authenticated
// it, and the namespace it acts on (the credential's own, or, for an admin
// credential, the one NamespaceHeader names).
type caller struct {
	namespace string // the namespace the call acts on
	admin     bool   // role admin: every namespace and the cluster
	role      fsm.Role
	scope     []string // empty: the whole namespace
	// The credential: its name, its own namespace and that namespace's
	// internal id, its id and hash (for long calls to check it again:
	// stillValid).
	credential string
	home       string
	homeID     uint64
	credID     uint64
	hash       []byte
	remote     string // the client's address, for the audit log
	// hold is the request's share of the reply budget (replybudget.go),
	// released when the request's handler returns; nil: not budgeted.
	hold *replyHold
}

type callerKey struct{}

func callerFrom(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// tokenChecker resolves bearer tokens against the namespaces' credentials.
type tokenChecker interface {
	Credential(name string, id uint64) (fsm.CredentialInfo, uint64, bool)
	Namespace(name string) (fsm.NamespaceInfo, bool)
	LinearizableIndex(ctx context.Context) (uint64, error)
}

// NamespaceHeader names the namespace an admin credential's call acts on
// (the EventStore, Subscriptions and Credentials services); without it a
// call acts on the credential's own namespace. A non-admin credential may
// name only its own.
const NamespaceHeader = "Skald-Namespace"

type authenticator struct {
	b       tokenChecker
	unknown *unknownTokens // tokens not known here
	used    *lastUsed
	audit   *auditor
	log     *slog.Logger
	replies *replyBudget // the reply budget of the requests it admits
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

// expiredError is a token of a credential that has expired.
type expiredError struct {
	namespace, credential string
	at                    int64
}

func (e *expiredError) Error() string {
	return fmt.Sprintf("credential %q of namespace %q expired at %s", e.credential, e.namespace,
		evdb.RFC3339Seconds(e.at))
}

// revokedError ends a long call whose credential was revoked (or whose
// namespace was deleted) after it was admitted.
type revokedError struct{ namespace, credential string }

func (e *revokedError) Error() string {
	return fmt.Sprintf("credential %q of namespace %q was revoked (or its namespace deleted)", e.credential, e.namespace)
}

// permissionError is a call the caller's credential may not make.
type permissionError struct{ msg string }

func (e *permissionError) Error() string { return e.msg }

// check returns the caller a token belongs to. A namespace this node does
// not know yet (created through another node a moment ago), or whose token
// does not match (re-created, or a credential created a moment ago), is
// looked up again after catching up with the leader: a namespace and a
// credential are usable on every node once their creation is
// acknowledged.
func (a authenticator) check(ctx context.Context, token string) (caller, error) {
	name, err := nstoken.Parse(token)
	if err != nil {
		return caller{}, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("malformed token: %w", err))
	}
	c, ok, err := lookupToken(ctx, a.b, a.unknown, name, token)
	if err != nil {
		return caller{}, toConnect(ctx, a.log, err) // an expired credential: Unauthenticated
	}
	if !ok {
		return caller{}, connect.NewError(connect.CodeUnauthenticated, errors.New("unknown namespace or wrong token"))
	}
	a.used.touch(c)
	return c, nil
}

// findToken finds the credential of a well-formed token of namespace
// name as this node has applied it: the credential whose id the token
// carries, else the namespace's initial token. Each is one map lookup and
// one constant-time comparison, whatever the number of credentials.
func findToken(b tokenChecker, name string, hash []byte, id uint64) (fsm.CredentialInfo, uint64, bool) {
	if id != 0 {
		if cred, nsID, ok := b.Credential(name, id); ok && subtle.ConstantTimeCompare(cred.TokenHash, hash) == 1 {
			return cred, nsID, true
		}
	}
	if cred, nsID, ok := b.Credential(name, 0); ok && subtle.ConstantTimeCompare(cred.TokenHash, hash) == 1 {
		return cred, nsID, true
	}
	return fsm.CredentialInfo{}, 0, false
}

func callerOf(name string, nsID uint64, cred fsm.CredentialInfo, hash []byte) caller {
	return caller{namespace: name, admin: cred.Role == fsm.RoleAdmin, role: cred.Role, scope: cred.Scope,
		credential: cred.Name, home: name, homeID: nsID, credID: cred.ID, hash: hash}
}

// lookupToken finds the caller of a well-formed token of namespace name.
// ok is false for an unknown namespace or a wrong secret; err reports a
// failed catch-up with the leader, or an expired credential
// (*expiredError). A token this node does not know is looked up again
// once unknown has caught the node up with the leader, unless unknown
// remembers it from a moment ago.
func lookupToken(ctx context.Context, b tokenChecker, unknown *unknownTokens, name, token string) (c caller, ok bool, err error) {
	hash := nstoken.Hash(token)
	id := nstoken.CredentialID(token)
	known := func() (caller, bool, error) {
		cred, nsID, found := findToken(b, name, hash, id)
		if !found {
			return caller{}, false, nil
		}
		if cred.Expired(time.Now()) {
			return caller{}, false, &expiredError{namespace: name, credential: cred.Name, at: cred.ExpiresAt}
		}
		return callerOf(name, nsID, cred, hash), true, nil
	}
	if c, ok, err := known(); ok || err != nil {
		return c, ok, err
	}
	remember := name != nstoken.AdminNamespace
	if remember && unknown.remembered(hash) {
		return caller{}, false, nil
	}
	start, err := unknown.catchUp(ctx)
	if err != nil {
		return caller{}, false, err
	}
	if c, ok, err := known(); ok || err != nil {
		return c, ok, err
	}
	if remember {
		unknown.remember(hash, start)
	}
	return caller{}, false, nil
}

// stillValid reports why c's credential no longer admits calls (revoked,
// its namespace deleted, expired), or nil. Long calls (Subscribe,
// Consume, GET /subscribe) ask it as they go, so that a revocation ends
// them too.
func stillValid(b tokenChecker, c caller) error {
	if c.hash == nil {
		return nil // not authenticated by a token (tests of handlers alone)
	}
	cred, nsID, ok := b.Credential(c.home, c.credID)
	if !ok || nsID != c.homeID || subtle.ConstantTimeCompare(cred.TokenHash, c.hash) != 1 {
		return &revokedError{namespace: c.home, credential: c.credential}
	}
	if cred.Expired(time.Now()) {
		return &expiredError{namespace: c.home, credential: c.credential, at: cred.ExpiresAt}
	}
	return nil
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
	if c, err = actingOn(a.b, c, h.Get(NamespaceHeader)); err != nil {
		return nil, err
	}
	return context.WithValue(ctx, callerKey{}, c), nil
}

// actingOn returns c acting on namespace name (NamespaceHeader; empty:
// its own): an admin credential may name any namespace that exists, any
// other only its own.
func actingOn(b tokenChecker, c caller, name string) (caller, error) {
	if name == "" || name == c.namespace {
		return c, nil
	}
	if !c.admin {
		return caller{}, connect.NewError(connect.CodePermissionDenied,
			fmt.Errorf("credential %q (role %s) of namespace %q may not act on namespace %q: only an admin credential may name another namespace", c.credential, c.role, c.home, name))
	}
	if _, ok := b.Namespace(name); !ok {
		return caller{}, connect.NewError(connect.CodeNotFound, fmt.Errorf("namespace %q (%s) does not exist", name, NamespaceHeader))
	}
	c.namespace = name
	return c, nil
}

// beforeBody authenticates each call of a skald.v1 service from its
// headers before connect-go reads the body: a caller without a valid
// token is answered at once, in its protocol, and its body is never read
// or buffered (net/http then closes an HTTP/1.1 connection whose body is
// left unread). The caller goes on the request's context, where the
// interceptor finds it. Refusals count in the RPC metrics as the
// interceptor's would.
//
// The caller's role is checked here too (permit, access.go), so a call
// its credential may not make is refused before its body is read.
func (a authenticator) beforeBody(next http.Handler, errw *connect.ErrorWriter, m *rpcMetrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, err := a.authenticate(r.Context(), r.Header)
		if err == nil {
			if err = permit(callerFrom(ctx), r.URL.Path); err != nil {
				a.audit.refused(ctx, r.URL.Path, err)
			}
		}
		if err != nil {
			m.observe(r.URL.Path, start, err)
			w.Header().Set("Connection", "close")
			_ = errw.Write(w, r, err)
			return
		}
		c := callerFrom(ctx)
		c.remote = r.RemoteAddr
		if a.replies != nil {
			// Released once the reply has been written: see replybudget.go.
			c.hold = a.replies.hold()
			defer c.hold.release()
		}
		ctx = context.WithValue(ctx, callerKey{}, c)
		if c.namespace != c.home {
			a.audit.record(ctx, "admin.other-namespace", c.namespace, strings.TrimPrefix(r.URL.Path, "/"))
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// admitted returns ctx when beforeBody already authenticated its call,
// else the context authenticate makes from h, with the caller's role
// checked for procedure.
func (a authenticator) admitted(ctx context.Context, h http.Header, procedure string) (context.Context, error) {
	if _, ok := ctx.Value(callerKey{}).(caller); ok {
		return ctx, nil
	}
	ctx, err := a.authenticate(ctx, h)
	if err != nil {
		return nil, err
	}
	return ctx, permit(callerFrom(ctx), procedure)
}

// WrapUnary implements connect.Interceptor: the caller, and its scope
// against what the request touches (permitScope).
func (a authenticator) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		procedure := req.Spec().Procedure
		ctx, err := a.admitted(ctx, req.Header(), procedure)
		if err != nil {
			return nil, err
		}
		if err := permitScope(callerFrom(ctx), procedure, req.Any()); err != nil {
			a.audit.refused(ctx, procedure, err)
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
		procedure := conn.Spec().Procedure
		ctx, err := a.admitted(ctx, conn.RequestHeader(), procedure)
		if err != nil {
			return err
		}
		c := callerFrom(ctx)
		ctx, stop := whileValid(ctx, a.b, c)
		defer stop()
		if procedure == skaldv1connect.EventStoreAppendStreamProcedure {
			// Each request's scope is its own answer, not the stream's end
			// (appendstream.go checks it).
			err = next(ctx, conn)
		} else {
			err = next(ctx, scopedConn{StreamingHandlerConn: conn, c: c, procedure: procedure})
		}
		if cause := credentialEnded(ctx); cause != nil && yieldsToCredential(err) {
			return toConnect(context.Background(), a.log, cause)
		}
		return err
	}
}

// yieldsToCredential reports whether the credential's error is the
// stream's answer rather than err, what its handler returned: always,
// but for a NotFound of the handler's own (the namespace deleted under a
// subscription), which the credential check may have found at the same
// moment and reports less precisely. Whatever else a handler returns
// once its context ended (cancelled, the i/o timeout of a receive
// unblocked by it) is the credential's doing.
func yieldsToCredential(err error) bool {
	return connect.CodeOf(err) != connect.CodeNotFound
}

// whileValid returns ctx, ended (its cause the credential's error) once
// c's credential no longer admits calls: revoked, expired, or its
// namespace deleted. It checks every credentialRecheck until stop. So a
// stream (Subscribe, Consume) holding a revoked credential ends with the
// authentication error, on every node, within a second of the revoke.
func whileValid(ctx context.Context, b tokenChecker, c caller) (context.Context, func()) {
	if c.hash == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(credentialRecheck)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := stillValid(b, c); err != nil {
					cancel(err)
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// credentialEnded returns the credential's error when whileValid ended
// ctx, else nil.
func credentialEnded(ctx context.Context) error {
	var re *revokedError
	var ee *expiredError
	if cause := context.Cause(ctx); errors.As(cause, &re) || errors.As(cause, &ee) {
		return cause
	}
	return nil
}

// scopedConn checks the caller's scope against each message a stream
// receives (the request of a server stream).
type scopedConn struct {
	connect.StreamingHandlerConn
	c         caller
	procedure string
}

func (s scopedConn) Receive(msg any) error {
	if err := s.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	return permitScope(s.c, s.procedure, msg)
}

// requireAdmin fails PermissionDenied unless the caller holds an admin
// credential.
func requireAdmin(ctx context.Context) error {
	if c := callerFrom(ctx); !c.admin {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("this call needs an admin credential; credential %q of namespace %q is %s", c.credential, c.home, c.role))
	}
	return nil
}
