package evdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/jsonscan"
)

// OutcomeNotApplied is the "outcome" of an error reply when nothing was
// proposed (a Skald extension EventoDB's SDKs ignore).
const OutcomeNotApplied = "not-applied"

// Error is an EventoDB error: an HTTP status, a code and a message, with
// optional details.
type Error struct {
	Status  int
	Code    string
	Message string
	Details map[string]any
	// NotApplied: nothing was proposed; the reply says "outcome":
	// OutcomeNotApplied.
	NotApplied bool
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Invalid is 400 INVALID_REQUEST with a formatted message.
func Invalid(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST", Message: fmt.Sprintf(format, args...)}
}

// Refused is 400 for a name fsm refused, in fsm's words.
func Refused(prefix string, err error) *Error {
	var ve *fsm.ValidationError
	if errors.As(err, &ve) {
		return Invalid("%s%s", prefix, ve.Describe())
	}
	return Invalid("%s%v", prefix, err)
}

// WriteJSON writes v with EventoDB's encoding (HTML-escaped, newline).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// WriteError writes e as EventoDB's error reply.
func WriteError(w http.ResponseWriter, e *Error) {
	WriteJSON(w, e.Status, e.Body())
}

// Body is e as EventoDB's error reply: {"error": {code, message, ...}}.
func (e *Error) Body() map[string]any {
	body := map[string]any{"code": e.Code, "message": e.Message}
	if e.Details != nil {
		body["details"] = e.Details
	}
	if e.NotApplied {
		body["outcome"] = OutcomeNotApplied
	}
	return map[string]any{"error": body}
}

// NotFound answers unknown paths as EventoDB does.
func NotFound(w http.ResponseWriter, r *http.Request) {
	WriteError(w, &Error{Status: http.StatusNotFound, Code: "NOT_FOUND",
		Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
}

// BadText is the /rpc refusal of a body that is valid JSON but not text:
// 400 INVALID_REQUEST naming the argument and the path in it.
func BadText(e *jsonscan.TextError) *Error {
	what, path := "the body", e.Path
	if rest, ok := strings.CutPrefix(path, "["); ok {
		if i := strings.IndexByte(rest, ']'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				what, path = fmt.Sprintf("argument %d", n), strings.TrimPrefix(rest[i+1:], ".")
				if n == 0 {
					what = "the method name"
				}
			}
		}
	}
	where := ""
	switch {
	case e.InName:
		where = " in the member name " + path
	case path != "":
		where = " at " + path
	}
	return &Error{Status: http.StatusBadRequest, Code: "INVALID_REQUEST",
		Message: fmt.Sprintf("%s is not UTF-8 text%s: %s (byte %d of the body)", what, where, e.Reason, e.Offset),
		Details: map[string]any{"path": e.Path, "offset": e.Offset}}
}
