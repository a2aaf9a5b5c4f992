package node

import (
	"errors"
	"testing"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// TestMaxNamespaces: with Config.MaxNamespaces the leader stamps its limit
// into every create and apply refuses one past it, on every replica alike;
// a create forwarded by a follower comes back as the same
// fsm.NamespaceLimitError. Deleting a namespace makes room again.
func TestMaxNamespaces(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, func(cfg *Config) { cfg.MaxNamespaces = 2 })
	createNamespace(t, c.Leader().Node, "a")
	createNamespace(t, c.Followers()[0].Node, "b")
	for _, tn := range c.Nodes {
		_, err := tn.CreateNamespace(ctxT(t), &fsmv1.CreateNamespace{Name: "c"})
		var le *fsm.NamespaceLimitError
		if !errors.As(err, &le) || le.Name != "c" || le.Limit != 2 || !errors.Is(err, fsm.ErrNamespaceLimit) {
			t.Fatalf("third create through %s: %v, want the limit of 2 refusing it", tn.ID(), err)
		}
	}
	c.WaitConverged()
	for _, tn := range c.Nodes {
		if _, ok := tn.store.Namespace("c"); ok || len(tn.store.Namespaces()) != 2 {
			t.Fatalf("%s holds %v", tn.ID(), tn.store.Namespaces())
		}
	}
	if _, err := c.Followers()[1].DeleteNamespace(ctxT(t), &fsmv1.DeleteNamespace{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, c.Followers()[1].Node, "c")
}
