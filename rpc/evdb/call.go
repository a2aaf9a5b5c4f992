package evdb

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/jsonscan"
)

// MaxRPCBody bounds a /rpc request body.
const MaxRPCBody = 16 << 20

// Token returns the request's token: the token query parameter if set,
// else the Authorization bearer. No token, or an Authorization of another
// scheme, is 401 AUTH_REQUIRED.
func Token(r *http.Request) (string, *Error) {
	if t := r.URL.Query().Get("token"); t != "" {
		return t, nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", &Error{Status: http.StatusUnauthorized, Code: "AUTH_REQUIRED",
			Message: "a token is required (token parameter or Authorization: Bearer)"}
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", &Error{Status: http.StatusUnauthorized, Code: "AUTH_REQUIRED",
			Message: "Authorization must be Bearer <token>"}
	}
	return strings.TrimSpace(token), nil
}

// DecodeRPC parses the request envelope: a JSON array whose first element
// is the method name. The body is read whole; a body past the limit of an
// http.MaxBytesReader is 400 naming the limit.
func DecodeRPC(body io.Reader) (string, Args, *Error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return "", nil, Invalid("request body is larger than %d bytes", mbe.Limit)
		}
		return "", nil, Invalid("read request body: %v", err)
	}
	if arr, ok := jsonscan.Elements(raw); ok && len(arr) > 0 {
		if method, ok := jsonscan.String(arr[0]); ok {
			return method, Args(arr[1:]), nil
		}
	}
	// Not a plain ["method", ...] array: encoding/json decides, and words
	// every error.
	var arr []json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&arr); err != nil {
		e := Invalid("body must be a JSON array [\"method\", args...]")
		e.Details = map[string]any{"error": err.Error()}
		return "", nil, e
	}
	if dec.More() {
		return "", nil, Invalid("body must hold one JSON array")
	}
	// Elements refused it, but encoding/json would read bad text as U+FFFD.
	if terr := jsonscan.BadText(raw); terr != nil {
		return "", nil, BadText(terr)
	}
	if len(arr) == 0 {
		return "", nil, Invalid("empty request array: the first element must be the method name")
	}
	var method string
	if err := json.Unmarshal(arr[0], &method); err != nil {
		return "", nil, Invalid("the first element must be the method name (a string)")
	}
	return method, Args(arr[1:]), nil
}

// Args are the positional arguments of a call.
type Args []json.RawMessage

// IsNull reports whether raw is JSON null.
func IsNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// IsObject reports whether raw is a JSON object.
func IsObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && jsonscan.Valid(t)
}

// CompactJSON strips insignificant whitespace (what EventoDB's float64
// round trip also does) while keeping the number text exact. raw is valid
// JSON (every caller checked it is an object); without whitespace to strip
// it is returned as is.
func CompactJSON(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	return jsonscan.Compact(raw)
}

// Str returns argument i as a string: present and a string, else 400.
func (a Args) Str(i int, name string) (string, *Error) {
	if i >= len(a) {
		return "", Invalid("missing argument %d (%s)", i+1, name)
	}
	var s string
	if err := json.Unmarshal(a[i], &s); err != nil {
		return "", Invalid("argument %d (%s) must be a string", i+1, name)
	}
	return s, nil
}

// NonEmpty is Str that also refuses the empty string.
func (a Args) NonEmpty(i int, name string) (string, *Error) {
	s, err := a.Str(i, name)
	if err == nil && s == "" {
		err = Invalid("argument %d (%s) must not be empty", i+1, name)
	}
	return s, err
}

// Opts returns argument i as an options object: absent is empty, {} is
// empty, anything else but an object (null included) is 400.
func (a Args) Opts(i int) (Opts, *Error) {
	if i >= len(a) {
		return Opts{}, nil
	}
	var m map[string]json.RawMessage
	if IsNull(a[i]) || json.Unmarshal(a[i], &m) != nil {
		return nil, Invalid("argument %d (options) must be an object", i+1)
	}
	return Opts(m), nil
}

// NamedInNamespace reads the arguments [name, {namespace, ...}] of a
// call on one named thing of a namespace: the name (not empty), the
// options, and the namespace option (empty: the caller's).
func (a Args) NamedInNamespace() (name string, opts Opts, ns string, everr *Error) {
	if name, everr = a.NonEmpty(0, "name"); everr != nil {
		return "", nil, "", everr
	}
	if opts, everr = a.Opts(1); everr != nil {
		return "", nil, "", everr
	}
	if ns, _, everr = opts.Str("namespace"); everr != nil {
		return "", nil, "", everr
	}
	return name, opts, ns, nil
}

// Opts is a call's options object.
type Opts map[string]json.RawMessage

// Num reads a numeric option: any JSON number, truncated toward zero;
// beyond ±2^62 it is out of range.
func (o Opts) Num(key string) (int64, bool, *Error) {
	raw, ok := o[key]
	if !ok {
		return 0, false, nil
	}
	var f float64
	if IsNull(raw) || json.Unmarshal(raw, &f) != nil {
		return 0, false, Invalid("option %s must be a number", key)
	}
	if math.IsNaN(f) || math.Abs(f) > 1<<62 {
		return 0, false, Invalid("option %s is out of range", key)
	}
	return int64(f), true, nil
}

// Bool reads a boolean option: absent is false.
func (o Opts) Bool(key string) (bool, *Error) {
	raw, ok := o[key]
	if !ok {
		return false, nil
	}
	var b bool
	if IsNull(raw) || json.Unmarshal(raw, &b) != nil {
		return false, Invalid("option %s must be true or false", key)
	}
	return b, nil
}

// Str reads a string option and whether it was given.
func (o Opts) Str(key string) (string, bool, *Error) {
	raw, ok := o[key]
	if !ok {
		return "", false, nil
	}
	var s string
	if IsNull(raw) || json.Unmarshal(raw, &s) != nil {
		return "", false, Invalid("option %s must be a string", key)
	}
	return s, true, nil
}

// BatchSize applies the spec's rule: default 1000, -1 unlimited, over
// 10000 is 400, 0 and other negatives mean the default.
func (o Opts) BatchSize() (int, *Error) {
	n, ok, err := o.Num("batchSize")
	switch {
	case err != nil:
		return 0, err
	case !ok || n == 0 || n < -1:
		return 1000, nil
	case n == -1:
		return -1, nil
	case n > 10000:
		return 0, Invalid("batchSize must be at most 10000, got %d", n)
	}
	return int(n), nil
}

// ExpectedVersion reads the expectedVersion option: nil when absent, -1
// (no stream yet) or more, as fsm.ValidateExpectedVersion (and so apply)
// holds it.
func (o Opts) ExpectedVersion() (*int64, *Error) {
	ev, ok, everr := o.Num("expectedVersion")
	switch {
	case everr != nil:
		return nil, everr
	case !ok:
		return nil, nil
	}
	if err := fsm.ValidateExpectedVersion("expectedVersion", &ev); err != nil {
		return nil, Invalid("expectedVersion %s", err.(*fsm.ValidationError).Reason)
	}
	return &ev, nil
}

// StreamArg reads argument 1, the stream name: not empty, and a name fsm
// takes.
func StreamArg(args Args) (string, *Error) {
	s, err := args.NonEmpty(0, "streamName")
	if err != nil {
		return "", err
	}
	if verr := fsm.ValidateStreamName("streamName", s); verr != nil {
		return "", Refused("", verr)
	}
	return s, nil
}

// StreamAndOpts reads the arguments most stream methods take: the stream
// name, then the options object (absent means none).
func StreamAndOpts(args Args) (string, Opts, *Error) {
	stream, everr := StreamArg(args)
	if everr != nil {
		return "", nil, everr
	}
	opts, everr := args.Opts(1)
	return stream, opts, everr
}
