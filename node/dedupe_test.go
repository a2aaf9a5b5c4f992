package node

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// TestDedupeAcrossSnapshotInstallAndLeaderChange: a follower whose disk
// was wiped gets the state (the id index with it) by snapshot install,
// then leads; a retry of an append written before, sent through it and
// through a follower, is answered with the original positions and
// writes nothing.
func TestDedupeAcrossSnapshotInstallAndLeaderChange(t *testing.T) {
	c := newCluster(t, 3, smallSnapshots)
	createNamespace(t, c.Leader().Node, "app")
	const id = "0192f0c4-0000-7000-8000-0000000000f1"
	retry := func(n *Node) (*fsmv1.Result, error) {
		return n.Append(ctxT(t), &fsmv1.Append{Namespace: "app", Stream: "acct-1", Messages: []*fsmv1.NewMessage{
			{Id: id, Type: "Opened", Data: []byte(`{"a":1}`), ClientId: true},
		}})
	}
	writeN(t, c.Leader().Node, "app", 5)
	orig, err := retry(c.Leader().Node)
	if err != nil || orig.GetAppend().Duplicate {
		t.Fatalf("original append: %+v, %v", orig, err)
	}
	c.WaitConverged()
	f := c.Followers()[0]
	f.Stop()
	for _, d := range []string{"raft", "fsm"} {
		if err := os.RemoveAll(filepath.Join(f.Dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	writeN(t, c.Leader().Node, "app", 100)
	l := c.Leader()
	testutil.Eventually(t, waitTimeout, "the leader to compact its log", func() bool {
		first, _ := l.logs.FirstIndex()
		return first > orig.Index
	})
	f.Restart()
	c.WaitConverged()
	testutil.Eventually(t, waitTimeout, "the wiped follower to install a snapshot", func() bool {
		snap := f.raft.Stats()["last_snapshot_index"]
		return snap != "0" && snap != ""
	})
	if err := l.TransferLeadership(ctxT(t), f.ID()); err != nil {
		t.Fatalf("transfer leadership to the restored follower: %v", err)
	}
	testutil.Eventually(t, waitTimeout, "the restored follower to lead", func() bool { return c.Leader() == f })
	for _, n := range []*TestNode{f, c.Followers()[0]} {
		got, err := retry(n.Node)
		if err != nil {
			t.Fatalf("retry on %s: %v", n.ID(), err)
		}
		want := proto.Clone(orig).(*fsmv1.Result)
		want.GetAppend().Duplicate, want.Index = true, got.Index
		if !proto.Equal(got, want) || got.Index <= orig.Index {
			t.Fatalf("retry on %s answered %v, want %v", n.ID(), got, want)
		}
	}
	c.WaitConverged()
	if n := len(readAll(t, f.Node, "app", nodeapi.ReadOptions{})); n != 106 {
		t.Fatalf("namespace holds %d messages, want 106", n)
	}
}
