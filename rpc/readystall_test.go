package rpc

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/skalddb/skald/internal/testutil"
)

// stalledBackend is a node whose state machine waits for a resource.
type stalledBackend struct {
	Backend
	stall error
}

func (b stalledBackend) StorageStall() error { return b.stall }

// TestReadyzReportsStorageStall: a node whose state machine waits for a
// resource (node.Node.StorageStall) is not ready, even once it was, and
// /readyz says why; it is ready again when the stall ends.
func TestReadyzReportsStorageStall(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	testutil.Eventually(t, waitTimeout, "leadership", s.n.IsLeader)
	createAdmin(t, s.n)
	b := &stalledBackend{Backend: s.n}
	h := &readiness{b: b}
	ready := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := ready(); code != http.StatusOK {
		t.Fatalf("/readyz before the stall: %d %q", code, body)
	}
	b.stall = errors.New("node: the state machine is waiting for a resource for 3s: too many open files; raise its limit")
	if code, body := ready(); code != http.StatusServiceUnavailable || !strings.Contains(body, "too many open files") {
		t.Fatalf("/readyz while stalled: %d %q", code, body)
	}
	b.stall = nil
	if code, body := ready(); code != http.StatusOK {
		t.Fatalf("/readyz after the stall: %d %q", code, body)
	}
}
