package node

import (
	"errors"
	"fmt"
	"testing"

	"github.com/skalddb/skald/fsm"
)

// TestRefusedIndexCreateWritesNoEntry: a create the state refuses for
// certain (the name is taken, the namespace is full of indexes or does
// not exist) is answered as before, through the leader and a follower,
// and puts nothing in the Raft log.
func TestRefusedIndexCreateWritesNoEntry(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	for i := 0; i < fsm.MaxIndexes; i++ {
		idx := amountIndex("app")
		if i > 0 {
			idx.Definition.Name = fmt.Sprintf("amount%d", i)
		}
		if _, err := l.CreateIndex(ctxT(t), idx); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	c.WaitConverged()
	before := l.raft.LastIndex()
	full := amountIndex("app")
	full.Definition.Name = "onetoomany"
	for _, tc := range []struct {
		name   string
		create func() error
		want   func(error) bool
	}{
		{"taken", func() error { _, err := l.CreateIndex(ctxT(t), amountIndex("app")); return err },
			func(err error) bool { return errors.Is(err, fsm.ErrIndexExists) }},
		{"taken, through a follower", func() error {
			_, err := c.Followers()[0].CreateIndex(ctxT(t), amountIndex("app"))
			return err
		}, func(err error) bool { return errors.Is(err, fsm.ErrIndexExists) }},
		{"full", func() error { _, err := l.CreateIndex(ctxT(t), full); return err },
			func(err error) bool { var v *fsm.ValidationError; return errors.As(err, &v) && v.Field == "name" }},
		{"no namespace", func() error { _, err := l.CreateIndex(ctxT(t), amountIndex("nope")); return err },
			func(err error) bool { return errors.Is(err, fsm.ErrNamespaceNotFound) }},
	} {
		for i := 0; i < 5; i++ {
			if err := tc.create(); !tc.want(err) {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
	}
	if after := l.raft.LastIndex(); after != before {
		t.Fatalf("20 refused creates moved the leader's last log index from %d to %d", before, after)
	}
}
