package node

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// sampleValue reads one series of reg: a histogram's sample count, or a
// counter or gauge value; with label set, the series whose label has
// that value. ok is false when there is no such series.
func sampleValue(t testing.TB, reg prometheus.Gatherer, name, label, value string) (v float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if label != "" {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == label && lp.GetValue() != value {
						continue series
					}
				}
			}
			switch {
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			default:
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

// The series on-call engineers alert on (deploy/prometheus/alerts.yaml)
// read what the node does: a leader is known, the log is synced and has
// a size, a local snapshot is timed, the open namespace's database is
// measured, and a write with no leader to take it is counted refused.
func TestAlertMetrics(t *testing.T) {
	c := StartTestCluster(t, 3, TestClusterOptions{Config: func(i int, cfg *Config) {
		cfg.LeaderWait = time.Second
	}})
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	for range 5 {
		if _, err := appendOne(ctxT(t), l.Node, "app", "s-1", ""); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged()
	positive := []string{
		"skald_raft_has_leader", "skald_raft_leader_changes_total", "skald_raft_last_log_index", "skald_raft_log_bytes",
		"skald_raft_log_sync_seconds", "skald_node_disk_free_bytes", "skald_node_open_namespaces", "skald_node_pebble_bytes",
	}
	for _, tn := range c.Nodes {
		for _, name := range positive {
			if v, ok := sampleValue(t, tn.Registry, name, "", ""); !ok || v <= 0 {
				t.Errorf("node %d: %s = %v (exported: %v), want > 0", tn.index, name, v, ok)
			}
		}
		if v, _ := sampleValue(t, tn.Registry, "skald_raft_has_leader", "", ""); v != 1 {
			t.Errorf("node %d: skald_raft_has_leader = %v, want 1", tn.index, v)
		}
		for _, s := range storageSeries {
			if v, ok := sampleValue(t, tn.Registry, s.name, "", ""); !ok || v < 0 {
				t.Errorf("node %d: %s = %v (exported: %v)", tn.index, s.name, v, ok)
			}
		}
	}

	if err := l.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if v, _ := sampleValue(t, l.Registry, "skald_raft_snapshots_total", "kind", "local"); v != 1 {
		t.Fatalf("skald_raft_snapshots_total{kind=local} = %v after one snapshot", v)
	}
	if v, _ := sampleValue(t, l.Registry, "skald_raft_snapshot_seconds", "", ""); v != 1 {
		t.Fatalf("skald_raft_snapshot_seconds holds %v samples after one snapshot", v)
	}

	// Without a quorum the leader steps down, and a write waits out
	// LeaderWait for a leader that never comes.
	for _, f := range c.Followers() {
		f.Kill()
	}
	testutil.Eventually(t, testWait, "the survivor to see no leader", func() bool {
		v, _ := sampleValue(t, l.Registry, "skald_raft_has_leader", "", "")
		return v == 0
	})
	if _, err := appendOne(ctxT(t), l.Node, "app", "s-1", ""); !errors.Is(err, nodeapi.ErrNoLeader) {
		t.Fatalf("write without a quorum: %v, want ErrNoLeader", err)
	}
	if v, _ := sampleValue(t, l.Registry, "skald_node_proposals_refused_total", "reason", refusedNoLeader); v != 1 {
		t.Fatalf("skald_node_proposals_refused_total{reason=no_leader} = %v after one refused write", v)
	}
}
