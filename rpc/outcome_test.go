package rpc

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node"
)

// A write refused before anything was proposed says so in a field, not
// only in its message: OutcomeHeader on every Connect protocol, "outcome"
// in EventoDB's error. Here the refusal is real: a leader whose followers
// are gone steps down, and a write waits out LeaderWait for a leader.
func TestNotAppliedIsMarked(t *testing.T) {
	t.Parallel()
	c := node.StartTestCluster(t, 3, node.TestClusterOptions{
		Config: func(_ int, cfg *node.Config) { cfg.LeaderWait = 500 * time.Millisecond },
		Handler: func(tn *node.TestNode) http.Handler {
			o := defaultOptions
			o.Registerer, o.Gatherer = tn.Registry, tn.Registry
			return NewHandler(tn.Node, o)
		},
	})
	l := c.Leader()
	createAdmin(t, l.Node)
	for _, f := range c.Followers() {
		f.Kill()
	}
	testutil.Eventually(t, waitTimeout, "the leader to step down", func() bool { return !l.IsLeader() })
	s := &server{n: l.Node, addr: l.Addr}

	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			_, err := newClients(s, p, adminToken).events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{
				Stream: "account-1", Messages: []*skaldv1.NewMessage{{Type: "Opened", Data: []byte(`{}`)}}}))
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable {
				t.Fatalf("append without a quorum: %v, want Unavailable", err)
			}
			if got := ce.Meta().Get(OutcomeHeader); got != OutcomeNotApplied {
				t.Fatalf("%s = %q on %q, want %q", OutcomeHeader, got, ce.Message(), OutcomeNotApplied)
			}
		})
	}
	t.Run("eventodb", func(t *testing.T) {
		status, body := evClient{t: t, addr: s.addr, token: adminToken}.call("stream.write", "account-1", map[string]any{"type": "Opened", "data": map[string]any{}})
		var reply struct {
			Error struct{ Code, Outcome string }
		}
		if err := json.Unmarshal(body, &reply); err != nil {
			t.Fatalf("%d %s: %v", status, body, err)
		}
		if status != http.StatusServiceUnavailable || reply.Error.Code != "UNAVAILABLE" || reply.Error.Outcome != OutcomeNotApplied {
			t.Fatalf("stream.write without a quorum: %d %s, want 503 UNAVAILABLE with outcome %q", status, body, OutcomeNotApplied)
		}
	})
}
