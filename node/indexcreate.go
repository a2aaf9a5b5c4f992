package node

import (
	"context"
	"errors"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// refuseCreateIndex answers a create that apply refuses for certain (an
// invalid definition, a namespace that does not exist, a name taken, a
// namespace holding fsm.MaxIndexes) from a linearizable read, so that it
// writes no log entry: a refused create costs every replica nothing.
// Any other outcome of the read (no leader, not caught up) leaves the
// answer to apply, which holds the create to the same rules for creates
// that race.
func (n *Node) refuseCreateIndex(ctx context.Context, c *fsmv1.CreateIndex) error {
	if err := fsm.ValidateIndexDefinition(c.GetDefinition()); err != nil {
		return err // what apply would answer first
	}
	name := c.Definition.Name
	_, err := n.Read(ctx, c.Namespace, nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}, func(v *fsm.View) error {
		return v.CheckNewIndex(name)
	})
	var invalid *fsm.ValidationError
	if errors.Is(err, fsm.ErrNamespaceNotFound) || errors.Is(err, fsm.ErrIndexExists) || errors.As(err, &invalid) {
		return err
	}
	return nil
}
