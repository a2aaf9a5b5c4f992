package node

import (
	"reflect"
	"testing"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// typeQuery reads, locally on n, the global positions a query of type T
// alone matches in ns, and whether ns's type index is complete there.
func typeQuery(t *testing.T, n *Node, ns string) (gps []int64, complete bool) {
	t.Helper()
	_, err := n.Read(ctxT(t), ns, nodeapi.ReadOptions{Consistency: nodeapi.Local}, func(v *fsm.View) error {
		msgs, err := v.Query(fsm.Query{Items: []fsm.QueryItem{{Types: []string{"T"}}}}, 0, -1)
		for _, m := range msgs {
			gps = append(gps, m.GlobalPosition)
		}
		if err == nil {
			complete, err = v.TypeIndexComplete()
		}
		return err
	})
	if err != nil {
		t.Fatalf("query on %s: %v", n.ID(), err)
	}
	return gps, complete
}

// TestTypeIndexGate: a namespace created while every server answers is
// indexed by type from its first message; one created while a server
// without a recorded version is down (it might be a server too old to
// know the index) starts legacy, and
// once every server answers again the leader backfills it, so that every
// node ends with the same index and a query of types alone sees the
// untagged messages written before, on every node.
func TestTypeIndexGate(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.VersionInterval = -1 }) // no version is recorded
	l := c.Leader()
	createNamespace(t, l.Node, "now")
	writeN(t, l.Node, "now", 3)
	if gps, complete := typeQuery(t, l.Node, "now"); !complete || !reflect.DeepEqual(gps, []int64{1, 2, 3}) {
		t.Fatalf("namespace created with every server up: type query %v, complete %v; want [1 2 3], complete", gps, complete)
	}

	down := c.Followers()[0]
	down.Stop()
	createNamespace(t, l.Node, "later")
	writeN(t, l.Node, "later", 5)
	if gps, complete := typeQuery(t, l.Node, "later"); complete || len(gps) != 0 {
		t.Fatalf("namespace created with a server down: type query %v, complete %v; want legacy (untagged messages not seen)", gps, complete)
	}
	down.Restart()
	c.WaitConverged()
	testutil.Eventually(t, waitTimeout, "the leader to backfill the type index of later", func() bool {
		_, complete := typeQuery(t, c.Leader().Node, "later")
		return complete
	})
	writeN(t, c.Leader().Node, "later", 1)
	c.WaitConverged()
	for _, n := range c.Nodes {
		if gps, complete := typeQuery(t, n.Node, "later"); !complete || !reflect.DeepEqual(gps, []int64{1, 2, 3, 4, 5, 6}) {
			t.Fatalf("%s after the backfill: type query %v, complete %v; want [1..6], complete", n.ID(), gps, complete)
		}
	}
}
