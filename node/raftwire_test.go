package node

import (
	"reflect"
	"testing"

	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// A cluster in the middle of a rolling upgrade: member 2 is of the
// version before skald-raft/2. With each member leading in turn, every
// write reaches every member, and the two upgraded members speak
// skald-raft/2 to each other.
func TestMixedVersionClusterReplicates(t *testing.T) {
	c := StartTestCluster(t, 3, TestClusterOptions{Config: func(i int, cfg *Config) { cfg.olderRaftFraming = i == 2 }})
	createNamespace(t, c.Leader().Node, "app")
	const perLeader = 30
	for i, tn := range c.Nodes {
		if l := c.Leader(); l != tn {
			if err := l.TransferLeadership(ctxT(t), tn.ID()); err != nil {
				t.Fatalf("transfer leadership to member %d: %v", i, err)
			}
			testutil.Eventually(t, waitTimeout, "member to lead", func() bool { return c.Leader() == tn })
		}
		writeN(t, tn.Node, "app", perLeader)
		c.WaitConverged()
	}
	want := readAll(t, c.Nodes[0].Node, "app", nodeapi.ReadOptions{Consistency: nodeapi.Local})
	checkHistory(t, want, 3*perLeader)
	for i, tn := range c.Nodes {
		if got := readAll(t, tn.Node, "app", nodeapi.ReadOptions{Consistency: nodeapi.Local}); !reflect.DeepEqual(
			got,
			want,
		) {
			t.Fatalf("member %d holds %d messages, member 0 %d, or they differ", i, len(got), len(want))
		}
	}
	if c.Nodes[2].trans.Binary() {
		t.Fatalf("the older member has a skald-raft/2 wire")
	}
	for i, tn := range c.Nodes[:2] {
		if n := tn.trans.BinaryServed(); n == 0 {
			t.Fatalf("upgraded member %d answered no request over skald-raft/2", i)
		}
		if legacy := tn.trans.LegacyPeers(); legacy != 1 {
			t.Fatalf("upgraded member %d holds %d peers legacy, want 1 (the older member)", i, legacy)
		}
	}
}
