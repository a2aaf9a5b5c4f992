package rpc

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/testutil"
)

// stalledBackend is a node whose state machine waits for a resource.
type stalledBackend struct {
	Backend
	stall error
}

func (b stalledBackend) StorageStall() error { return b.stall }

// readyz asks h and returns its status and body.
func readyz(h *readiness) func() (int, string) {
	return func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
}

// TestReadyzReportsStorageStall: a node whose state machine waits for a
// resource (node.Node.StorageStall) is not ready, even once it was, and
// /readyz says why; it is ready again when the stall ends.
func TestReadyzReportsStorageStall(t *testing.T) {
	s := startServer(t)
	testutil.Eventually(t, waitTimeout, "leadership", s.n.IsLeader)
	createAdmin(t, s.n)
	b := &stalledBackend{Backend: s.n}
	ready := readyz(&readiness{b: b})
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

// failedBackend is a node with a failed index.
type failedBackend struct {
	Backend
	failed []fsm.IndexFailure
}

func (b failedBackend) FailedIndexes() ([]fsm.IndexFailure, error) { return b.failed, nil }

// TestReadyzNamesFailedIndexes: a failed index leaves the node ready (its
// other work goes on) and /readyz names the index and its reason.
func TestReadyzNamesFailedIndexes(t *testing.T) {
	s := startServer(t)
	testutil.Eventually(t, waitTimeout, "leadership", s.n.IsLeader)
	createAdmin(t, s.n)
	b := &failedBackend{Backend: s.n}
	ready := readyz(&readiness{b: b})
	if code, body := ready(); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz without a failed index: %d %q", code, body)
	}
	const reason = "its checkpoint (XC) does not decode"
	b.failed = []fsm.IndexFailure{{Namespace: "app", Index: "amount", ID: 7, Reason: reason}}
	code, body := ready()
	if code != http.StatusOK || !strings.HasPrefix(body, "ready\n") ||
		!strings.Contains(body, `index "amount" of namespace "app" failed on this node: `+reason) {
		t.Fatalf("/readyz with a failed index: %d %q", code, body)
	}
}
