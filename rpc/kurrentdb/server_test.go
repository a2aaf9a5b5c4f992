package kurrentdb

import "testing"

func TestSameOffset(t *testing.T) {
	for _, c := range []struct {
		advertise, api, member string
		want                   string // "": left out
	}{
		{"10.0.0.1:2113", "10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.2:2113"},
		{"127.0.0.1:2113", "127.0.0.1:8080", "127.0.0.1:8090", "127.0.0.1:2123"},
		{"[::1]:2113", "[::1]:8080", "[::1]:8080", "[::1]:2113"},
		{"127.0.0.1:9000", "127.0.0.1:8080", "127.0.0.1:65000", ""}, // past the last port
		{"no-port", "127.0.0.1:8080", "127.0.0.1:8080", ""},
		{"127.0.0.1:2113", "127.0.0.1:8080", "no-port", ""},
	} {
		got, ok := SameOffset(c.advertise, c.api)("id", c.member)
		if !ok {
			got = ""
		}
		if got != c.want {
			t.Errorf("SameOffset(%q, %q)(%q) = %q, want %q", c.advertise, c.api, c.member, got, c.want)
		}
	}
}
