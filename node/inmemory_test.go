package node

import (
	"context"
	"io"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// TestInMemoryCluster runs a 3-node cluster with Config.InMemory: writes
// through a follower, snapshots and compaction, a replaced member caught
// up by a snapshot install and a backup all work, and nothing is written
// to disk.
func TestInMemoryCluster(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.InMemory, cfg.DataDir = true, ""
		smallSnapshots(cfg)
	})
	f := c.Followers()
	createNamespace(t, f[0].Node, "app")
	writeN(t, f[0].Node, "app", 200)

	// Replace a follower: an in-memory node comes back empty, as a new
	// server, and must be sent a snapshot (the log is compacted).
	gone := f[1]
	oldID := gone.ID()
	gone.Kill()
	l := c.Leader()
	if err := l.RemoveServer(ctxT(t), oldID); err != nil {
		t.Fatalf("remove %s: %v", oldID, err)
	}
	gone.Restart() // it knows no leader until added: ask l, not c.Leader()
	if gone.ID() == oldID {
		t.Fatal("a restarted in-memory node kept its id")
	}
	testutil.Eventually(t, waitTimeout, "adding the replacement", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return l.AddVoter(ctx, gone.ID(), gone.Proxy.Addr()) == nil
	})
	writeN(t, c.Leader().Node, "app", 10)
	c.WaitConverged()
	want := readAll(t, c.Leader().Node, "app", nodeapi.ReadOptions{})
	if len(want) != 210 {
		t.Fatalf("leader holds %d messages, want 210", len(want))
	}
	if got := readAll(t, gone.Node, "app", nodeapi.ReadOptions{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("the replacement holds %d messages, differing from the leader's %d", len(got), len(want))
	}

	meta, err := c.Leader().Backup(ctxT(t), io.Discard, func(int64, fsm.SnapshotMeta) {})
	if err != nil || meta.Index == 0 {
		t.Fatalf("backup of an in-memory node: %+v %v", meta, err)
	}
	for _, tn := range c.Nodes {
		if entries, err := os.ReadDir(tn.Dir); err != nil || len(entries) > 0 {
			t.Fatalf("in-memory node %s wrote to its data directory: %v %v", tn.ID(), entries, err)
		}
	}
}
