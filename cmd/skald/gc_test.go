package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A running server reports the collector settings it chose on /metrics.
func TestServerGCSettings(t *testing.T) {
	t.Parallel()
	p := startServer(t, "", "--admin-token", testAdmin, "--gc-percent", "300", "--memory-limit-bytes", strconv.Itoa(3<<30))
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`go_gc_gogc_percent 300`, `go_gc_gomemlimit_bytes 3.221225472e+09`} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).Match(body) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	_, stderr, code := runCLI(t, nil, "server", "--gc-percent", "5")
	if code != 2 || !strings.Contains(stderr, "--gc-percent must be between 10 and 10000, got 5") {
		t.Fatalf("--gc-percent 5: exit %d, stderr %q; want a usage error", code, stderr)
	}
}
