package fsm

import (
	"fmt"
	"slices"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// ConditionFailedError is returned when an append's condition (DCB) found
// a message matching its query above its position. Nothing was written.
type ConditionFailedError struct {
	After          int64
	GlobalPosition int64 // the first match above After
}

func (e *ConditionFailedError) Error() string { return "fsm: " + e.Describe() }

// Describe is the error's text without the package prefix: the message
// both APIs send.
func (e *ConditionFailedError) Describe() string {
	return fmt.Sprintf("append condition failed: message at global position %d matches the query and is after %d", e.GlobalPosition, e.After)
}

// QueryOf converts a query of a command or request.
func QueryOf(q *fsmv1.Query) Query {
	out := Query{Items: make([]QueryItem, len(q.GetItems()))}
	for i, it := range q.GetItems() {
		out.Items[i] = QueryItem{Types: it.Types, Tags: it.Tags}
	}
	return out
}

// ValidateCondition checks a condition's shape; whether its position is
// in the future depends on the state (checkConditionAfter).
func ValidateCondition(c *fsmv1.AppendCondition) error {
	if c == nil {
		return nil
	}
	if c.FailIfEventsMatch == nil {
		return invalid("condition.fail_if_events_match", "must be set")
	}
	if err := ValidateQuery("condition.fail_if_events_match", QueryOf(c.FailIfEventsMatch)); err != nil {
		return err
	}
	if c.After < 0 {
		return invalid("condition.after", "must not be negative, got %d", c.After)
	}
	return nil
}

// checkConditionAfter refuses a condition whose position no message has
// reached yet: no reader can have seen it, so it is a client's bug (and
// "nothing after a future position" would let writes it never saw pass).
func (nb *nsBatch) checkConditionAfter(c *fsmv1.AppendCondition) error {
	if c != nil && c.After >= nb.nextGP {
		return invalid("condition.after", "is past the namespace's last global position %d, got %d", nb.nextGP-1, c.After)
	}
	return nil
}

// checkCondition fails when a message matching c's query exists above
// c.After, as of every entry before the current one: in the database, or
// among the indexed messages this call staged (nsBatch.indexed), which all
// come after the database's. Types alone match untagged messages once
// the namespace's type index is complete (typeindex.go). So the verdict depends only on the log
// prefix, however Raft cut it into calls. After an import's clear the
// database still holds what the clear removes: the call commits first.
// A storage error stops the node.
func (a *applier) checkCondition(nb *nsBatch, c *fsmv1.AppendCondition) error {
	if c == nil {
		return nil
	}
	if nb.cleared {
		a.flush(nb)
	}
	q := QueryOf(c.FailIfEventsMatch)
	all := nb.typeIdx.complete()
	gp, found, err := firstMatch(nb.ns.db, q, c.After, all)
	if err != nil {
		a.fatal("namespace %q: evaluate condition: %v", nb.ns.rec.Name, err)
	}
	for i := 0; !found && i < len(nb.indexed); i++ {
		if m := &nb.indexed[i]; m.gp > c.After && q.matches(m.typ, m.tags, all) {
			gp, found = m.gp, true
		}
	}
	if found {
		return &ConditionFailedError{After: c.After, GlobalPosition: gp}
	}
	return nil
}

// indexedMsg is what a condition needs of a staged message.
type indexedMsg struct {
	gp   int64
	typ  string
	tags []string
}

// matches reports whether a message of type typ with tags matches q: with
// all, as the complete type index finds it (every message); without, as
// the legacy one (tagged messages only).
func (q Query) matches(typ string, tags []string, all bool) bool {
	if len(tags) == 0 && !all {
		return false // in no index
	}
	for _, it := range q.Items {
		if len(it.Types) > 0 && !slices.Contains(it.Types, typ) {
			continue
		}
		all := true
		for _, t := range it.Tags {
			if !slices.Contains(tags, t) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// firstMatch returns the first global position above after of a message
// that matches q and still exists; all: through the complete type index.
func firstMatch(db interface {
	iterReader
	getter
}, q Query, after int64, all bool) (gp int64, found bool, err error) {
	qp, err := openQuery(db, q, all, 0)
	if err != nil {
		return 0, false, err
	}
	defer func() {
		if cerr := qp.close(); err == nil {
			err = cerr
		}
	}()
	for next := after + 1; ; {
		gp, ok, err := qp.root.seek(next)
		if err != nil || !ok {
			return 0, false, err
		}
		ok, err = exists(db, messageKey(gp))
		if err != nil || ok {
			return gp, ok, err
		}
		next = gp + 1 // removed by a deletion: its index entries stay
	}
}
