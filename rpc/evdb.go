package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/buildinfo"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/rpc/evdb"
)

// The EventoDB-compatible HTTP API (docs/eventodb-api.md):
// POST /rpc, GET /subscribe, POST /import, GET /health, GET /version, and
// JSON 404s for every other path. evdb_methods.go dispatches the /rpc
// methods, held by evdb_stream.go, evdb_category.go, evdb_namespace.go and
// evdb_streamdelete.go; evdb_sse.go serves /subscribe, evdb_import.go
// /import. Errors from the node go through errorTable (errors.go). What
// is read and written on the wire (the envelope, arguments and options,
// the error reply, /import's records) is package rpc/evdb's.

// eventodb serves the EventoDB API over a Backend.
type eventodb struct {
	b       Backend
	log     *slog.Logger
	traced  bool // Options.TracerProvider is set (trace.go)
	sub     subscribeConfig
	build   buildinfo.Info // for GET /version and sys.version
	limits  Limits         // with defaults
	unknown *unknownTokens // shared with the Connect API's authenticator
	metrics *rpcMetrics    // shared with the Connect API
	used    *lastUsed      // shared with the Connect API
	audit   *auditor
	creds   credentialOps
	replies *replyBudget // shared with the Connect API
}

func (e *eventodb) health(w http.ResponseWriter, _ *http.Request) {
	evdb.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// versionReply is GET /version's body: EventoDB's {"version"} (Skald's
// version, as sys.version answers), what built the binary, and the level
// of the EventoDB API served, in a field of its own.
type versionReply struct {
	buildinfo.Info
	EventoDB string `json:"eventodb"`
}

// serveVersion answers GET /version (no token, as EventoDB).
func (e *eventodb) serveVersion(w http.ResponseWriter, _ *http.Request) {
	evdb.WriteJSON(w, http.StatusOK, versionReply{Info: e.build, EventoDB: buildinfo.EventoDBAPI})
}

// authenticate resolves the request's caller, catching up with the leader
// once when the namespace is unknown here or its token differs. An admin
// credential acts on the namespace NamespaceHeader names, if any.
func (e *eventodb) authenticate(ctx context.Context, r *http.Request) (caller, *evdb.Error) {
	token, everr := evdb.Token(r)
	if everr != nil {
		return caller{}, everr
	}
	name, err := nstoken.Parse(token)
	if err != nil {
		return caller{}, &evdb.Error{Status: http.StatusUnauthorized, Code: "AUTH_INVALID_TOKEN", Message: "malformed token",
			Details: map[string]any{"error": err.Error()}}
	}
	c, ok, err := lookupToken(ctx, e.b, e.unknown, name, token)
	if err != nil {
		return caller{}, e.backendError(ctx, err)
	}
	if !ok {
		return caller{}, &evdb.Error{Status: http.StatusForbidden, Code: "AUTH_UNAUTHORIZED",
			Message: "unknown namespace or wrong token", Details: map[string]any{"namespace": name}}
	}
	e.used.touch(c)
	c.remote = r.RemoteAddr
	if target := r.Header.Get(NamespaceHeader); target != "" && target != c.namespace {
		if !c.admin {
			return caller{}, &evdb.Error{Status: http.StatusForbidden, Code: "AUTH_UNAUTHORIZED",
				Message: fmt.Sprintf("%s may not act on namespace %q: only an admin credential may name another namespace",
					c.describe(), target),
				Details: map[string]any{"namespace": target, "credential": c.credential, "role": c.role.String()}}
		}
		if _, ok := e.b.Namespace(target); !ok {
			return caller{}, &evdb.Error{Status: http.StatusNotFound, Code: "NAMESPACE_NOT_FOUND",
				Message: fmt.Sprintf("namespace %q (%s) not found", target, NamespaceHeader)}
		}
		c.namespace = target
	}
	return c, nil
}

// evPermit refuses (403 AUTH_UNAUTHORIZED) a call of method c may not
// make: its role (access.go), or its scope against the stream or category
// the call names in its first argument (args; nil for the paths, whose
// scope their handlers check with evScope).
func evPermit(c caller, method string, args evdb.Args) *evdb.Error {
	a, ok := evMethodAccess[method]
	if err := denied(c, method, a, ok); err != nil {
		return evDenied(c, method, err)
	}
	if a.touches != touchesRequest || len(c.scope) == 0 || args == nil {
		return nil
	}
	name, everr := args.Str(0, "stream")
	if everr != nil {
		return everr
	}
	if strings.HasPrefix(method, "category.") {
		return evScope(c, method, "", name)
	}
	return evScope(c, method, name, "")
}

// evScope refuses a stream or a category outside c's scope; neither
// given (a subscription to every stream) needs an unscoped credential.
func evScope(c caller, method, stream, category string) *evdb.Error {
	switch {
	case len(c.scope) == 0:
		return nil
	case stream != "" && !fsm.ScopeAllowsStream(c.scope, stream):
		return evDenied(c, method, scopeDenied(c, method, "stream", stream))
	case category != "" && !fsm.ScopeAllowsCategory(c.scope, category):
		return evDenied(c, method, scopeDenied(c, method, "category", category))
	case stream == "" && category == "":
		return evDenied(c, method, fmt.Errorf("%s may not call %s on every stream: it needs an unscoped credential", c.describe(), method))
	}
	return nil
}

func evDenied(c caller, method string, err error) *evdb.Error {
	return &evdb.Error{Status: http.StatusForbidden, Code: "AUTH_UNAUTHORIZED", Message: err.Error(),
		Details: map[string]any{"method": method, "credential": c.credential, "role": c.role.String(), "namespace": c.home}}
}

// rpc serves POST /rpc: ["method", args...].
func (e *eventodb) rpc(w http.ResponseWriter, r *http.Request) {
	// Counted as the Connect procedures are: a known method by its name,
	// anything refused before one is known as eventodb/rpc.
	start, procedure, code, namespace := time.Now(), evdbRefused, "ok", ""
	defer func() {
		e.metrics.observeCode(procedure, code, start)
		if e.traced {
			evdbSpan(r.Context(), procedure, namespace, code)
		}
	}()
	fail := func(everr *evdb.Error) {
		code = evCodeLabel(everr.Code)
		evdb.WriteError(w, everr)
	}
	if r.Method != http.MethodPost {
		fail(&evdb.Error{Status: http.StatusMethodNotAllowed, Code: "INVALID_REQUEST", Message: "use POST"})
		return
	}
	c, everr := e.authenticate(r.Context(), r)
	if everr != nil {
		fail(everr)
		return
	}
	namespace = c.namespace
	// Released once the reply has been written (replybudget.go).
	c.hold = e.replies.hold()
	defer c.hold.release()
	method, args, everr := evdb.DecodeRPC(http.MaxBytesReader(w, r.Body, evdb.MaxRPCBody))
	if everr != nil {
		fail(everr)
		return
	}
	h, ok := evMethods[method]
	if !ok {
		fail(&evdb.Error{Status: http.StatusNotFound, Code: "METHOD_NOT_FOUND",
			Message: fmt.Sprintf("unknown method %q", method)})
		return
	}
	procedure = evdbPrefix + method // one of evMethods: bounded
	if everr := evPermit(c, method, args); everr != nil {
		fail(everr)
		return
	}
	ctx := context.WithValue(r.Context(), callerKey{}, c)
	if c.namespace != c.home {
		e.audit.record(ctx, "admin.other-namespace", c.namespace, method)
	}
	res, everr := h(e, ctx, args)
	if everr != nil {
		fail(everr)
		return
	}
	if p, ok := res.(*evPages); ok {
		e.writePages(ctx, w, p)
		return
	}
	evdb.WriteJSON(w, http.StatusOK, res)
}
