package node

import (
	"errors"
	"testing"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// TestInputRulesStamped: a write this node's API takes carries
// fsm.InputRules, on the leader and forwarded from a follower, so apply
// holds it to the strict rules on every replica even when the API edge
// let it through. A command that reaches the leader without rules (what
// an older follower forwards) is applied under the legacy rules, alike
// on every replica.
func TestInputRulesStamped(t *testing.T) {
	t.Parallel()
	c := StartTestCluster(t, 3, TestClusterOptions{})
	l := c.Leader()
	var f *TestNode
	for _, tn := range c.Nodes {
		if tn != l {
			f = tn
			break
		}
	}
	ctx := ctxT(t)
	if _, err := l.Node.CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: "app"}); err != nil {
		t.Fatal(err)
	}
	bad := func(stream string) *fsmv1.Append {
		return &fsmv1.Append{Namespace: "app", Stream: stream, Messages: []*fsmv1.NewMessage{{Type: "T", Data: []byte("{\"k\":\"\xff\"}")}}}
	}
	for _, tc := range []struct {
		name  string
		apply func() error
		field string
	}{
		{"append on the leader", func() error { _, err := l.Node.Append(ctx, bad("a-1")); return err }, "messages[0].data"},
		{"append forwarded by a follower", func() error { _, err := f.Node.Append(ctx, bad("a-2")); return err }, "messages[0].data"},
		{"namespace named CON", func() error {
			_, err := f.Node.CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: "CON"})
			return err
		}, "name"},
	} {
		var ve *fsm.ValidationError
		if err := tc.apply(); !errors.As(err, &ve) || ve.Field != tc.field {
			t.Fatalf("%s: %v, want a validation error on %s", tc.name, err, tc.field)
		}
	}

	// Without rules (as an older follower forwards it): the legacy rules.
	res, err := l.Node.applyLocal(ctx, &fsmv1.Command{Kind: &fsmv1.Command_Append{Append: bad("legacy-1")}})
	if err != nil {
		t.Fatalf("a legacy command: %v", err)
	}
	// Every replica holds it once it has applied the entry (SESSION reads
	// wait for that).
	at := nodeapi.ReadOptions{Consistency: nodeapi.Session, MinIndex: res.Index}
	for _, tn := range c.Nodes {
		var ver int64
		if _, err := tn.Node.Read(ctx, "app", at, func(v *fsm.View) (err error) {
			ver, err = v.StreamVersion("legacy-1")
			return err
		}); err != nil || ver != 0 {
			t.Fatalf("node %s: legacy-1 at version %d (%v), want 0 on every replica", tn.Node.ID(), ver, err)
		}
	}
}
