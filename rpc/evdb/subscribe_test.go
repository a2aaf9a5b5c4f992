package evdb

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestParseSubscribe: where each kind of subscription starts, and the
// queries refused, in EventoDB's words.
func TestParseSubscribe(t *testing.T) {
	for _, c := range []struct {
		query string
		want  Subscription
		msg   string
	}{
		{"stream=a-1&position=3", Subscription{Stream: "a-1", Next: 3}, ""},
		{"category=a&position=0&consumer=1&size=3", Subscription{Category: "a", Next: 1, Member: 1, Size: 3}, ""},
		{"all=true&position=-5", Subscription{All: true, Next: 1}, ""},
		{"stream=a-1&category=a", Subscription{}, "exactly one of stream, category or all=true is required"},
		{"", Subscription{}, "exactly one of stream, category or all=true is required"},
		{"stream=a-1&position=x", Subscription{}, "position must be an integer"},
		{"category=a&consumer=3&size=3", Subscription{}, "consumer must be 0..size-1 and size at least 1"},
		{"stream=a-1&size=2", Subscription{}, "consumer groups need a category subscription"},
		{"stream=a%00", Subscription{}, "stream must be 1..512 bytes of UTF-8 without NUL"},
	} {
		got, msg := ParseSubscribe(httptest.NewRequest(http.MethodGet, "/subscribe?"+c.query, nil))
		if got != c.want || msg != c.msg {
			t.Errorf("%q: %+v %q, want %+v %q", c.query, got, msg, c.want, c.msg)
		}
	}
}
