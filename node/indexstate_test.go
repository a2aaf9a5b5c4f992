package node

import (
	"errors"
	"testing"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// A pause taken by a follower stops the index on every node (its sibling
// goes on), shows in the metrics, refuses a LINEARIZABLE read it cannot
// satisfy, and a resume lets every node catch up from its checkpoint.
func TestIndexPauseEveryNode(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	for _, ci := range []*fsmv1.CreateIndex{amountIndex("app"), latestIndex("app")} {
		if _, err := l.CreateIndex(ctxT(t), ci); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		appendAmount(t, l.Node, "app", "acct-1", i)
	}
	// Every node has applied the indexes' creation before a local read
	// there asks for them.
	c.WaitConverged()
	info := func(n *Node, name string) fsm.IndexInfo {
		t.Helper()
		var out fsm.IndexInfo
		if _, err := n.Read(ctxT(t), "app", nodeapi.ReadOptions{Consistency: nodeapi.Local}, func(v *fsm.View) (err error) {
			out, err = v.Index(name)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, n := range c.Nodes {
		testutil.Eventually(t, waitTimeout, n.ID()+" to index the first events", func() bool { return info(n.Node, "amount").Checkpoint == 3 })
	}
	if _, err := c.Followers()[0].SetIndexState(ctxT(t), &fsmv1.SetIndexState{Namespace: "app", Name: "amount", Paused: true}); err != nil {
		t.Fatalf("pause through a follower: %v", err)
	}
	for i := range 4 {
		appendAmount(t, c.Leader().Node, "app", "acct-2", 10+i)
	}
	for _, n := range c.Nodes {
		// The sibling reached the end in a round whose snapshot holds the
		// pause (it comes before the appends): the paused one stayed.
		testutil.Eventually(t, waitTimeout, n.ID()+"'s sibling to index every event", func() bool { return info(n.Node, "latest").Checkpoint == 7 })
		if got := info(n.Node, "amount"); !got.Paused || got.Checkpoint != 3 || got.LagEvents != 4 {
			t.Fatalf("%s: paused index %+v, want checkpoint 3, lag 4", n.ID(), got)
		}
		if v, ok := sampleValue(t, n.Registry, "skald_index_paused", "", ""); !ok || v != 1 {
			t.Fatalf("%s: skald_index_paused = %v (%v), want 1", n.ID(), v, ok)
		}
	}
	f := c.Followers()[1]
	_, err := f.ReadIndexed(ctxT(t), "app", "amount", nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}, func(*fsm.View) error { return nil })
	if !errors.Is(err, fsm.ErrIndexPaused) {
		t.Fatalf("linearizable read of a paused index: %v, want ErrIndexPaused", err)
	}
	if _, err := c.Leader().SetIndexState(ctxT(t), &fsmv1.SetIndexState{Namespace: "app", Name: "amount"}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	for _, n := range c.Nodes {
		testutil.Eventually(t, waitTimeout, n.ID()+" to resume", func() bool {
			got := info(n.Node, "amount")
			return !got.Paused && got.Checkpoint == 7 && got.Entries == 7
		})
	}
	if _, err := f.ReadIndexed(ctxT(t), "app", "amount", nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}, func(*fsm.View) error { return nil }); err != nil {
		t.Fatalf("linearizable read after the resume: %v", err)
	}
}
