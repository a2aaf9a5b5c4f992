package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/buildinfo"
	"github.com/skalddb/skald/internal/jsonscan"
	"github.com/skalddb/skald/internal/nstoken"
)

// The EventoDB-compatible HTTP API (docs/eventodb-api.md):
// POST /rpc, GET /subscribe, POST /import, GET /health, GET /version, and
// JSON 404s for every other path. evdb_methods.go dispatches the /rpc
// methods, held by evdb_stream.go, evdb_category.go, evdb_namespace.go and
// evdb_streamdelete.go; evdb_sse.go serves /subscribe, evdb_import.go
// /import. Errors from the node go through errorTable (errors.go).

// maxRPCBody bounds a /rpc request body.
const maxRPCBody = 16 << 20

// evError is an EventoDB error: an HTTP status, a code and a message,
// with optional details.
type evError struct {
	status  int
	code    string
	message string
	details map[string]any
	// notApplied: nothing was proposed ("outcome": "not-applied", a Skald
	// extension EventoDB's SDKs ignore; see reply.notApplied).
	notApplied bool
}

func (e *evError) Error() string { return e.code + ": " + e.message }

func evInvalid(format string, args ...any) *evError {
	return &evError{status: http.StatusBadRequest, code: "INVALID_REQUEST", message: fmt.Sprintf(format, args...)}
}

// evRefused is 400 for a name fsm refused, in fsm's words.
func evRefused(prefix string, err error) *evError {
	var ve *fsm.ValidationError
	if errors.As(err, &ve) {
		return evInvalid("%s%s", prefix, ve.Describe())
	}
	return evInvalid("%s%v", prefix, err)
}

// writeJSON writes v with EventoDB's encoding (HTML-escaped, newline).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeEvError(w http.ResponseWriter, e *evError) {
	writeJSON(w, e.status, e.body())
}

// body is e as EventoDB's error reply: {"error": {code, message, ...}}.
func (e *evError) body() map[string]any {
	body := map[string]any{"code": e.code, "message": e.message}
	if e.details != nil {
		body["details"] = e.details
	}
	if e.notApplied {
		body["outcome"] = OutcomeNotApplied
	}
	return map[string]any{"error": body}
}

// evdb serves the EventoDB API over a Backend.
type evdb struct {
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

// notFound answers unknown paths as EventoDB does.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeEvError(w, &evError{status: http.StatusNotFound, code: "NOT_FOUND", message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
}

func (e *evdb) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// versionReply is GET /version's body: EventoDB's {"version"} (Skald's
// version, as sys.version answers), what built the binary, and the level
// of the EventoDB API served, in a field of its own.
type versionReply struct {
	buildinfo.Info
	EventoDB string `json:"eventodb"`
}

// serveVersion answers GET /version (no token, as EventoDB).
func (e *evdb) serveVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, versionReply{Info: e.build, EventoDB: buildinfo.EventoDBAPI})
}

// evToken returns the request's token: the token query parameter if set,
// else the Authorization bearer.
func evToken(r *http.Request) (string, *evError) {
	if t := r.URL.Query().Get("token"); t != "" {
		return t, nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", &evError{status: http.StatusUnauthorized, code: "AUTH_REQUIRED", message: "a token is required (token parameter or Authorization: Bearer)"}
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", &evError{status: http.StatusUnauthorized, code: "AUTH_REQUIRED", message: "Authorization must be Bearer <token>"}
	}
	return strings.TrimSpace(token), nil
}

// authenticate resolves the request's caller, catching up with the leader
// once when the namespace is unknown here or its token differs. An admin
// credential acts on the namespace NamespaceHeader names, if any.
func (e *evdb) authenticate(ctx context.Context, r *http.Request) (caller, *evError) {
	token, everr := evToken(r)
	if everr != nil {
		return caller{}, everr
	}
	name, err := nstoken.Parse(token)
	if err != nil {
		return caller{}, &evError{status: http.StatusUnauthorized, code: "AUTH_INVALID_TOKEN", message: "malformed token", details: map[string]any{"error": err.Error()}}
	}
	c, ok, err := lookupToken(ctx, e.b, e.unknown, name, token)
	if err != nil {
		return caller{}, e.backendError(ctx, err)
	}
	if !ok {
		return caller{}, &evError{status: http.StatusForbidden, code: "AUTH_UNAUTHORIZED", message: "unknown namespace or wrong token", details: map[string]any{"namespace": name}}
	}
	e.used.touch(c)
	c.remote = r.RemoteAddr
	if target := r.Header.Get(NamespaceHeader); target != "" && target != c.namespace {
		if !c.admin {
			return caller{}, &evError{status: http.StatusForbidden, code: "AUTH_UNAUTHORIZED",
				message: fmt.Sprintf("%s may not act on namespace %q: only an admin credential may name another namespace", c.describe(), target),
				details: map[string]any{"namespace": target, "credential": c.credential, "role": c.role.String()}}
		}
		if _, ok := e.b.Namespace(target); !ok {
			return caller{}, &evError{status: http.StatusNotFound, code: "NAMESPACE_NOT_FOUND", message: fmt.Sprintf("namespace %q (%s) not found", target, NamespaceHeader)}
		}
		c.namespace = target
	}
	return c, nil
}

// evPermit refuses (403 AUTH_UNAUTHORIZED) a call of method c may not
// make: its role (access.go), or its scope against the stream or category
// the call names in its first argument (args; nil for the paths, whose
// scope their handlers check with evScope).
func evPermit(c caller, method string, args evArgs) *evError {
	a, ok := evMethodAccess[method]
	if err := denied(c, method, a, ok); err != nil {
		return evDenied(c, method, err)
	}
	if a.touches != touchesRequest || len(c.scope) == 0 || args == nil {
		return nil
	}
	name, everr := args.str(0, "stream")
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
func evScope(c caller, method, stream, category string) *evError {
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

func evDenied(c caller, method string, err error) *evError {
	return &evError{status: http.StatusForbidden, code: "AUTH_UNAUTHORIZED", message: err.Error(),
		details: map[string]any{"method": method, "credential": c.credential, "role": c.role.String(), "namespace": c.home}}
}

// rpc serves POST /rpc: ["method", args...].
func (e *evdb) rpc(w http.ResponseWriter, r *http.Request) {
	// Counted as the Connect procedures are: a known method by its name,
	// anything refused before one is known as eventodb/rpc.
	start, procedure, code, namespace := time.Now(), evdbRefused, "ok", ""
	defer func() {
		e.metrics.observeCode(procedure, code, start)
		if e.traced {
			evdbSpan(r.Context(), procedure, namespace, code)
		}
	}()
	fail := func(everr *evError) {
		code = evCodeLabel(everr.code)
		writeEvError(w, everr)
	}
	if r.Method != http.MethodPost {
		fail(&evError{status: http.StatusMethodNotAllowed, code: "INVALID_REQUEST", message: "use POST"})
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
	method, args, everr := decodeRPC(http.MaxBytesReader(w, r.Body, maxRPCBody))
	if everr != nil {
		fail(everr)
		return
	}
	h, ok := evMethods[method]
	if !ok {
		fail(&evError{status: http.StatusNotFound, code: "METHOD_NOT_FOUND", message: fmt.Sprintf("unknown method %q", method)})
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
	writeJSON(w, http.StatusOK, res)
}

// decodeRPC parses the request envelope: a JSON array whose first element
// is the method name.
func decodeRPC(body io.Reader) (string, evArgs, *evError) {
	raw, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return "", nil, evInvalid("request body is larger than %d bytes", mbe.Limit)
		}
		return "", nil, evInvalid("read request body: %v", err)
	}
	if arr, ok := jsonscan.Elements(raw); ok && len(arr) > 0 {
		if method, ok := jsonscan.String(arr[0]); ok {
			return method, evArgs(arr[1:]), nil
		}
	}
	// Not a plain ["method", ...] array: encoding/json decides, and words
	// every error.
	var arr []json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&arr); err != nil {
		e := evInvalid("body must be a JSON array [\"method\", args...]")
		e.details = map[string]any{"error": err.Error()}
		return "", nil, e
	}
	if dec.More() {
		return "", nil, evInvalid("body must hold one JSON array")
	}
	// Elements refused it, but encoding/json would read bad text as U+FFFD.
	if terr := jsonscan.BadText(raw); terr != nil {
		return "", nil, evBadText(terr)
	}
	if len(arr) == 0 {
		return "", nil, evInvalid("empty request array: the first element must be the method name")
	}
	var method string
	if err := json.Unmarshal(arr[0], &method); err != nil {
		return "", nil, evInvalid("the first element must be the method name (a string)")
	}
	return method, evArgs(arr[1:]), nil
}

// evArgs are the positional arguments of a call.
type evArgs []json.RawMessage

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// str returns argument i as a string; required means present, a string and
// non-empty.
func (a evArgs) str(i int, name string) (string, *evError) {
	if i >= len(a) {
		return "", evInvalid("missing argument %d (%s)", i+1, name)
	}
	var s string
	if err := json.Unmarshal(a[i], &s); err != nil {
		return "", evInvalid("argument %d (%s) must be a string", i+1, name)
	}
	return s, nil
}

func (a evArgs) nonEmpty(i int, name string) (string, *evError) {
	s, err := a.str(i, name)
	if err == nil && s == "" {
		err = evInvalid("argument %d (%s) must not be empty", i+1, name)
	}
	return s, err
}

// opts returns argument i as an options object: absent is empty, {} is
// empty, anything else but an object (null included) is 400.
func (a evArgs) opts(i int) (evOpts, *evError) {
	if i >= len(a) {
		return evOpts{}, nil
	}
	var m map[string]json.RawMessage
	if isNull(a[i]) || json.Unmarshal(a[i], &m) != nil {
		return nil, evInvalid("argument %d (options) must be an object", i+1)
	}
	return evOpts(m), nil
}

type evOpts map[string]json.RawMessage

// num reads a numeric option: any JSON number, truncated toward zero.
func (o evOpts) num(key string) (int64, bool, *evError) {
	raw, ok := o[key]
	if !ok {
		return 0, false, nil
	}
	var f float64
	if isNull(raw) || json.Unmarshal(raw, &f) != nil {
		return 0, false, evInvalid("option %s must be a number", key)
	}
	if math.IsNaN(f) || math.Abs(f) > 1<<62 {
		return 0, false, evInvalid("option %s is out of range", key)
	}
	return int64(f), true, nil
}

func (o evOpts) boolean(key string) (bool, *evError) {
	raw, ok := o[key]
	if !ok {
		return false, nil
	}
	var b bool
	if isNull(raw) || json.Unmarshal(raw, &b) != nil {
		return false, evInvalid("option %s must be true or false", key)
	}
	return b, nil
}

func (o evOpts) str(key string) (string, bool, *evError) {
	raw, ok := o[key]
	if !ok {
		return "", false, nil
	}
	var s string
	if isNull(raw) || json.Unmarshal(raw, &s) != nil {
		return "", false, evInvalid("option %s must be a string", key)
	}
	return s, true, nil
}

// batchSize applies the spec's rule: default 1000, -1 unlimited, over
// 10000 is 400, 0 and other negatives mean the default.
func (o evOpts) batchSize() (int, *evError) {
	n, ok, err := o.num("batchSize")
	switch {
	case err != nil:
		return 0, err
	case !ok || n == 0 || n < -1:
		return 1000, nil
	case n == -1:
		return -1, nil
	case n > 10000:
		return 0, evInvalid("batchSize must be at most 10000, got %d", n)
	}
	return int(n), nil
}

// rfc3339 renders a time as EventoDB does: UTC, up to 9 fractional digits
// with trailing zeros dropped.
func rfc3339(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func rfc3339Seconds(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339) }
