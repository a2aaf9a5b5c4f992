package evdb

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestErrorReply pins the bytes of an error reply: status, content type,
// EventoDB's HTML-escaping encoder with its newline, details and the
// outcome only when set.
func TestErrorReply(t *testing.T) {
	for _, c := range []struct {
		name string
		err  *Error
		body string
	}{
		{"plain", Invalid("bad %s", "<x>"), `{"error":{"code":"INVALID_REQUEST","message":"bad \u003cx\u003e"}}` + "\n"},
		{"details", &Error{Status: http.StatusConflict, Code: "STREAM_VERSION_CONFLICT", Message: "m",
			Details: map[string]any{"expected": 1}, NotApplied: true},
			`{"error":{"code":"STREAM_VERSION_CONFLICT","details":{"expected":1},"message":"m",` +
				`"outcome":"not-applied"}}` + "\n"},
	} {
		rec := httptest.NewRecorder()
		WriteError(rec, c.err)
		ct := rec.Header().Get("Content-Type")
		if rec.Code != c.err.Status || ct != "application/json" || rec.Body.String() != c.body {
			t.Errorf("%s: %d %q %q, want %d %q", c.name, rec.Code, ct, rec.Body, c.err.Status, c.body)
		}
	}
	rec := httptest.NewRecorder()
	NotFound(rec, httptest.NewRequest(http.MethodGet, "/nowhere", nil))
	if want := `{"error":{"code":"NOT_FOUND","message":"no route for GET /nowhere"}}` + "\n"; rec.Code != 404 ||
		rec.Body.String() != want {
		t.Errorf("NotFound: %d %q, want 404 %q", rec.Code, rec.Body, want)
	}
}

// TestToken: the token parameter wins over the header; a bearer of any
// case is read trimmed; no token or another scheme is 401 AUTH_REQUIRED.
func TestToken(t *testing.T) {
	for _, c := range []struct {
		target, auth, token, code string
	}{
		{"/rpc?token=q", "Bearer h", "q", ""},
		{"/rpc", "bearer  h ", "h", ""},
		{"/rpc", "", "", "AUTH_REQUIRED"},
		{"/rpc", "Basic h", "", "AUTH_REQUIRED"},
		{"/rpc", "Bearer ", "", "AUTH_REQUIRED"},
	} {
		r := httptest.NewRequest(http.MethodPost, c.target, nil)
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		token, err := Token(r)
		code := ""
		if err != nil {
			code = err.Code
			if err.Status != http.StatusUnauthorized {
				t.Errorf("%s %q: status %d", c.target, c.auth, err.Status)
			}
		}
		if token != c.token || code != c.code {
			t.Errorf("%s %q: %q %q, want %q %q", c.target, c.auth, token, code, c.token, c.code)
		}
	}
}
