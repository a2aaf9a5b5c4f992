package node

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

func retentionPolicy(ns string, scope fsmv1.RetentionScope, name string, age time.Duration, count int64) *fsmv1.SetRetentionPolicy {
	return &fsmv1.SetRetentionPolicy{Namespace: ns, Policy: &fsmv1.RetentionPolicy{Scope: scope, Name: name, MaxAgeNanos: int64(age), MaxCount: count}}
}

// streamCount is the number of messages stream holds on n (local read).
func streamCount(t *testing.T, n *Node, ns, stream string) int {
	t.Helper()
	var c int
	_, err := n.Read(ctxT(t), ns, nodeapi.ReadOptions{Consistency: nodeapi.Local}, func(v *fsm.View) error {
		msgs, err := v.ReadStream(fsm.StreamQuery{Stream: stream, Limit: -1})
		c = len(msgs)
		return err
	})
	if err != nil {
		t.Fatalf("read %s on %s: %v", stream, n.ID(), err)
	}
	return c
}

// TestRetentionSameOnEveryNode: policies set through a follower and the
// leader's periodic expiry entries leave every node in the same state: a
// follower that was down while messages expired catches up from the log,
// and one wiped and rebuilt from a snapshot gets the same messages and
// policies.
func TestRetentionSameOnEveryNode(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		smallSnapshots(cfg)
		cfg.RetentionInterval = 50 * time.Millisecond
	})
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	writeN(t, l.Node, "app", 50) // s-0..s-4, 10 messages each
	c.WaitConverged()
	others := c.Others(l) // not Followers: l may have lost leadership since
	down, via := others[0], others[1]
	down.Stop()

	// Through a follower (forwarded): the category s keeps 4 per stream,
	// old-1 keeps nothing older than 300 ms.
	if _, err := via.SetRetentionPolicy(ctxT(t), retentionPolicy("app", fsmv1.RetentionScope_RETENTION_SCOPE_CATEGORY, "s", 0, 4)); err != nil {
		t.Fatalf("set a category policy through a follower: %v", err)
	}
	if _, err := via.SetRetentionPolicy(ctxT(t), retentionPolicy("app", fsmv1.RetentionScope_RETENTION_SCOPE_STREAM, "old-1", 300*time.Millisecond, 0)); err != nil {
		t.Fatalf("set a stream policy: %v", err)
	}
	for i := 0; i < 10; i++ {
		if _, err := appendOne(ctxT(t), via.Node, "app", "old-1", ""); err != nil {
			t.Fatal(err)
		}
	}
	writeN(t, l.Node, "app", 10) // two more each: still capped at 4
	testutil.Eventually(t, waitTimeout, "the leader to expire old-1 and cap s-*", func() bool {
		if streamCount(t, l.Node, "app", "old-1") != 0 {
			return false
		}
		for _, s := range []string{"s-0", "s-1", "s-2", "s-3", "s-4"} {
			if streamCount(t, l.Node, "app", s) != 4 {
				return false
			}
		}
		return true
	})
	// Freeze: no policy left to act, then compare.
	for _, p := range []*fsmv1.SetRetentionPolicy{
		retentionPolicy("app", fsmv1.RetentionScope_RETENTION_SCOPE_CATEGORY, "s", 0, 0),
		retentionPolicy("app", fsmv1.RetentionScope_RETENTION_SCOPE_STREAM, "old-1", 0, 0),
	} {
		if _, err := l.SetRetentionPolicy(ctxT(t), p); err != nil {
			t.Fatal(err)
		}
	}
	writeOther(t, l.Node, 60) // the leader compacts its log past the expiries
	c.WaitConverged()
	want := stateOf(t, l.Node, "app")
	if want.Stats.MessageCount != 5*4+60 || want.Stats.StreamCount != 6 {
		t.Fatalf("leader counts %+v, want 80 messages in 6 streams (s-0..s-4, other-1; old-1 emptied)", want.Stats)
	}
	for i, m := range want.Messages {
		if m.Stream == "s-0" && (m.Position < 8 || m.Position > 11) {
			t.Fatalf("message %d: s-0 keeps position %d, want 8..11", i, m.Position)
		}
	}

	down.Restart()
	c.WaitConverged()
	if got := stateOf(t, down.Node, "app"); !reflect.DeepEqual(got, want) {
		t.Fatalf("the follower that was down serves %d messages %+v, the leader %d %+v", len(got.Messages), got.Stats, len(want.Messages), want.Stats)
	}
	if got := stateOf(t, via.Node, "app"); !reflect.DeepEqual(got, want) {
		t.Fatalf("the forwarding follower differs from the leader")
	}

	// A policy set now reaches a follower rebuilt from a snapshot.
	if _, err := l.SetRetentionPolicy(ctxT(t), retentionPolicy("app", fsmv1.RetentionScope_RETENTION_SCOPE_NAMESPACE, "", time.Hour, 1000)); err != nil {
		t.Fatal(err)
	}
	via.Stop()
	for _, d := range []string{"raft", "fsm"} {
		if err := os.RemoveAll(filepath.Join(via.Dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	writeOther(t, c.Leader().Node, 50)
	l = c.Leader()
	testutil.Eventually(t, waitTimeout, "the leader to compact its log", func() bool {
		first, _ := l.logs.FirstIndex()
		return first > 10
	})
	via.Restart()
	c.WaitConverged()
	want = stateOf(t, l.Node, "app")
	if got := stateOf(t, via.Node, "app"); !reflect.DeepEqual(got, want) {
		t.Fatalf("the follower restored from a snapshot serves %d messages %+v, the leader %d %+v", len(got.Messages), got.Stats, len(want.Messages), want.Stats)
	}
	policies := func(n *Node) []string {
		var out []string
		_, err := n.Read(ctxT(t), "app", nodeapi.ReadOptions{Consistency: nodeapi.Local}, func(v *fsm.View) error {
			ps, err := v.RetentionPolicies()
			for _, p := range ps {
				out = append(out, p.String())
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := policies(via.Node), policies(l.Node); len(want) != 1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("restored follower's policies %v, the leader's %v (want the one namespace policy)", got, want)
	}
	if got := via.store.RetainedNamespaces(); len(got) != 1 || got[0] != "app" {
		t.Fatalf("restored follower's retention hint %v, want [app]", got)
	}
}

// TestRetentionReplayFromLog: a follower down while expiry entries were
// applied replays them from the log (no snapshot: the log is never
// compacted here), hours of its own clock later in spirit, and reaches the
// leader's state: apply decides from the leader's stamp only.
func TestRetentionReplayFromLog(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.RetentionInterval = 50 * time.Millisecond })
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	down := c.Followers()[0]
	down.Stop()
	if _, err := l.SetRetentionPolicy(ctxT(t), retentionPolicy("app", fsmv1.RetentionScope_RETENTION_SCOPE_CATEGORY, "s", 200*time.Millisecond, 3)); err != nil {
		t.Fatal(err)
	}
	writeN(t, l.Node, "app", 40)
	testutil.Eventually(t, waitTimeout, "the leader to age out every s-* message", func() bool {
		return stateOf(t, l.Node, "app").Stats.MessageCount == 0
	})
	if _, err := l.SetRetentionPolicy(ctxT(t), retentionPolicy("app", fsmv1.RetentionScope_RETENTION_SCOPE_CATEGORY, "s", 0, 0)); err != nil {
		t.Fatal(err)
	}
	writeN(t, l.Node, "app", 10) // these stay: no policy any more
	if first, _ := l.logs.FirstIndex(); first > 1 {
		t.Fatalf("the leader compacted its log (first index %d): the follower would not replay", first)
	}
	down.Restart()
	c.WaitConverged()
	want := stateOf(t, l.Node, "app")
	if want.Stats.MessageCount != 10 {
		t.Fatalf("leader counts %+v, want the 10 messages written after the policy went", want.Stats)
	}
	if got := stateOf(t, down.Node, "app"); !reflect.DeepEqual(got, want) {
		t.Fatalf("the follower that replayed the log serves %d messages %+v, the leader %d %+v", len(got.Messages), got.Stats, len(want.Messages), want.Stats)
	}
}
