package fsm

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Rebuilds of user-defined indexes (DESIGN.md, Rebuild and new
// versions). RebuildIndex is a log entry: apply stores the definition to
// build as the current one's next (XD name -> current, with next), under
// a new id (the entry's Raft index), so its entries never share keys
// with the current one's. Every node's loop then maintains both as two
// indexes; each node switches on its own: once its copy of next is built
// (a round reached the end of the namespace for it), its reads answer
// from next, and its loop drops the current one's entries and stops
// maintaining it. The switch is node-local because building is: a node
// never answers from an index it has not built, and never goes back (a
// later rebuild promotes next to current in apply, dropping the old
// current everywhere, before it sets a new next).

// rebuildIndex applies a RebuildIndex (see the top of this file).
func (a *applier) rebuildIndex(l *Entry, c *fsmv1.RebuildIndex) any {
	if err := ValidateGroupName("name", c.Name); err != nil {
		return err
	}
	if c.Definition != nil {
		if err := ValidateIndexDefinition(c.Definition); err != nil {
			return err
		}
		if c.Definition.Name != c.Name {
			return invalid("definition.name", "must be the index's name %q, got %q (a rebuild keeps the name)", c.Name, c.Definition.Name)
		}
	}
	nb, cur, answer := a.existingIndex(l, c.Namespace, c.Name)
	if nb == nil {
		return answer
	}
	cur = proto.Clone(cur).(*fsmv1.IndexDefinition)
	if cur.Next != nil {
		// A rebuild is pending: some nodes may answer from it already, so
		// it becomes the current definition; the old current goes.
		a.logChange(nb, changeDropped, 0, int64(cur.Id))
		paused := cur.Paused // the name's state (indexstate.go)
		cur = cur.Next
		cur.Paused = paused
	}
	src := c.Definition
	if src == nil {
		src = cur
	}
	next := proto.Clone(src).(*fsmv1.IndexDefinition)
	if next.Kind == fsmv1.IndexKind_INDEX_KIND_UNSPECIFIED {
		next.Kind = fsmv1.IndexKind_INDEX_KIND_EVENT
	}
	next.Next, next.Id, next.CreatedUnixNano, next.Paused = nil, l.Index, c.TimeUnixNano, false
	cur.Next = next
	a.putIndex(nb, cur)
	nb.dirty = true
	nb.done(l)
	return &fsmv1.IndexResult{Namespace: c.Namespace, Definition: next}
}

// nextBuilt reports whether d's pending rebuild is built in r (through
// which the caller reads checkpoints): the node answers from it.
func nextBuilt(r getter, d *fsmv1.IndexDefinition) (bool, error) {
	if d.Next == nil {
		return false, nil
	}
	v, err := get(r, indexCkptKey(d.Next.Id))
	if err != nil || v == nil {
		return false, err
	}
	c, err := decodeIndexCkpt(v)
	if err != nil {
		// Not built: the round that reads this checkpoint fails that
		// index alone (indexstate.go); its sibling answers meanwhile.
		return false, nil
	}
	return c.built, nil
}

// effectiveIndex is the definition this node answers queries of d's name
// from (d, or its rebuild once built) and the one still building beside
// it (nil when none).
func effectiveIndex(r getter, d *fsmv1.IndexDefinition) (answer, building *fsmv1.IndexDefinition, err error) {
	built, err := nextBuilt(r, d)
	switch {
	case err != nil:
		return nil, nil, err
	case built:
		return d.Next, nil, nil
	default:
		return d, d.Next, nil
	}
}

// roundDefs lists the indexes a round maintains: each definition, and
// its rebuild beside it until the rebuild is built; then the rebuild
// alone, the old definition's keys dropped (by the round that built it,
// or here while its checkpoint exists).
func (r *indexRound) roundDefs(defs []*fsmv1.IndexDefinition) ([]*fsmv1.IndexDefinition, error) {
	var out []*fsmv1.IndexDefinition
	for _, d := range defs {
		answer, building, err := effectiveIndex(r.b, d)
		if err != nil {
			return nil, err
		}
		if answer != d {
			_, closer, err := r.b.Get(indexCkptKey(d.Id))
			switch {
			case err == nil:
				closer.Close()
				if err := r.drop(d.Id); err != nil {
					return nil, err
				}
			case !errors.Is(err, pebble.ErrNotFound):
				return nil, err
			}
		}
		out = append(out, answer)
		if building != nil {
			out = append(out, building)
			if r.replaces == nil {
				r.replaces = map[uint64]uint64{}
			}
			r.replaces[building.Id] = d.Id
		}
	}
	return out, nil
}
