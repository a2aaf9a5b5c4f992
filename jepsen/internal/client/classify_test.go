package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/jepsen/internal/history"
	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/rpc"
)

// TestClassify runs Skald's own error mapping (rpc.ConnectError) on the
// errors the node and state machine return, and checks what the harness
// concludes from each.
func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		err  error
		f    string
		want history.Type
	}{
		{"ok", nil, history.FAppend, history.OK},
		{"version conflict", &fsm.VersionConflictError{Stream: "a-1", Expected: 3, Actual: 5}, history.FAppend, history.Fail},
		{"validation", &fsm.ValidationError{Field: "stream", Reason: "empty"}, history.FAppend, history.Fail},
		{"namespace missing", fsm.ErrNamespaceNotFound, history.FAppend, history.Fail},
		{"unknown outcome", fmt.Errorf("%w: leadership lost", nodeapi.ErrUnknownOutcome), history.FAppend, history.Info},
		// No leader shares Unavailable with an unknown outcome: the harness
		// cannot tell them apart, so it must assume the worst.
		{"no leader", nodeapi.ErrNoLeader, history.FAppend, history.Info},
		{"deadline", context.DeadlineExceeded, history.FAppend, history.Info},
		{"shutdown", nodeapi.ErrShutdown, history.FAppend, history.Info},
		{"internal", fmt.Errorf("disk on fire"), history.FAppend, history.Info},
		{"truncate of a stream never written", fsm.ErrStreamNotFound, history.FTruncate, history.Fail},
		{"truncate of a tombstone", fsm.ErrStreamDeleted, history.FTruncate, history.Fail},
		{"truncate outcome unknown", fmt.Errorf("%w: leadership lost", nodeapi.ErrUnknownOutcome), history.FTruncate, history.Info},
		{"delete at the wrong version", &fsm.VersionConflictError{Stream: "a-1", Expected: 3, Actual: 5}, history.FDelete, history.Fail},
		{"delete deadline", context.DeadlineExceeded, history.FDelete, history.Info},
		{"read not caught up", nodeapi.ErrNotCaughtUp, history.FReadStream, history.Fail},
		{"read deadline", context.DeadlineExceeded, history.FVersion, history.Fail},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.err != nil {
				err = rpc.ConnectError(tc.err)
			}
			if got := Classify(tc.f, err); got != tc.want {
				t.Fatalf("Classify(%s, %v) = %s, want %s", tc.f, err, got, tc.want)
			}
		})
	}
	actual, ok := conflictActual(rpc.ConnectError(&fsm.VersionConflictError{Stream: "a-1", Expected: 3, Actual: 5}))
	if !ok || actual != 5 {
		t.Fatalf("conflictActual = %d, %v; want 5, true", actual, ok)
	}
}

// TestClassifyTransport checks the two transport failures on real sockets:
// a refused connection sent nothing (fail), a request that timed out after
// it was sent may have been applied (info).
func TestClassifyTransport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()

	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)

	rec := history.NewRecorder(nil)
	c := New(rec, map[string]string{"refused": refused, "slow": slow.URL}, "t", 300*time.Millisecond)
	for _, tc := range []struct {
		node string
		want history.Type
	}{{"refused", history.Fail}, {"slow", history.Info}} {
		op := c.Append(context.Background(), 1, tc.node, "a-1", []string{c.NewID(1)}, nil)
		if op.Type != tc.want {
			t.Errorf("append via %s: %s (%s), want %s", tc.node, op.Type, op.Error, tc.want)
		}
	}
	ops := rec.Ops()
	if len(ops) != 4 || ops[0].Type != history.Invoke || ops[1].Index != 1 || ops[1].Time < ops[0].Time {
		t.Fatalf("recorded %+v", ops)
	}
}
