package fsm

import (
	"fmt"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// checkNewIndex is the state's rule for creating index name in namespace
// ns, which holds the definitions defs: the name is free and the
// namespace holds fewer than MaxIndexes. Apply holds every CreateIndex
// to it; a node checks it first at a linearizable view (CheckNewIndex),
// so that a create the state refuses for certain writes no log entry.
func checkNewIndex(ns string, defs map[string]*fsmv1.IndexDefinition, name string) error {
	if _, ok := defs[name]; ok {
		return fmt.Errorf("%w: %q", ErrIndexExists, name)
	}
	if len(defs) >= MaxIndexes {
		return invalid("name", "namespace %q has %d indexes, the most it may have; delete one first", ns, MaxIndexes)
	}
	return nil
}

// CheckNewIndex answers a create of index name as apply would at this
// view's state (checkNewIndex).
func (v *View) CheckNewIndex(name string) error {
	defs, err := loadIndexes(v.snap)
	if err != nil {
		return err
	}
	return checkNewIndex(v.ns.rec.GetName(), defs, name)
}
