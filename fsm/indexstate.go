package fsm

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Paused and failed indexes (DESIGN.md, Paused and failed indexes).
//
// Paused is replicated: SetIndexState sets IndexDefinition.paused in the
// XD record, so every node stops at the same log position. The loop of
// a paused index (and of its pending rebuild) still applies the change
// records (removals, imports, clears) to its entries, so they never name
// a message the namespace no longer holds and the change log is pruned
// as usual, but it reads no message above the checkpoint: the checkpoint
// and the coverage stay where they are, and a resume continues from
// there with nothing to replay.
//
// Failed is node-local: a round that meets an error confined to one
// index (an indexFailure) drops its whole batch, records XF id -> reason
// in a batch of its own, and returns; the next round leaves that index
// out (no records, no scan) and maintains its siblings. Which errors are
// confined to an index: its definition no longer validates on this
// binary (one a newer binary wrote, after a downgrade), or one of its own
// node-local values (XC, XS) does not decode. Every other error (Pebble's,
// a message or change record that does not decode, a commit) is the
// node's: the round fails as a whole and the loop retries it (a stall).
// A failed index keeps its keys until its name is rebuilt (the rebuild
// has a new id; the old keys go at the switch, XF with them) or deleted.

// indexFailure is an error confined to index id: the round fails that
// index alone (see the top of this file).
type indexFailure struct {
	id     uint64
	reason string
}

func (f *indexFailure) Error() string { return fmt.Sprintf("index %d failed: %s", f.id, f.reason) }

// failIndex is an indexFailure of index id.
func failIndex(id uint64, format string, args ...any) error {
	return &indexFailure{id: id, reason: fmt.Sprintf(format, args...)}
}

func indexFailedKey(id uint64) []byte {
	return appendUint64(append(make([]byte, 0, 10), prefixIndexFailed...), id)
}

// setIndexState applies a SetIndexState: the paused flag of the stored
// definition (its pending rebuild follows it). Setting it to what it is
// changes nothing and is no error.
func (a *applier) setIndexState(l *Entry, c *fsmv1.SetIndexState) any {
	if err := ValidateGroupName("name", c.Name); err != nil {
		return err
	}
	nb, cur, answer := a.existingIndex(l, c.Namespace, c.Name)
	if nb == nil {
		return answer
	}
	if cur.Paused != c.Paused {
		cur = proto.Clone(cur).(*fsmv1.IndexDefinition)
		cur.Paused = c.Paused
		a.putIndex(nb, cur)
	}
	nb.dirty = true
	nb.done(l)
	return &fsmv1.IndexResult{Namespace: c.Namespace, Definition: cur}
}

// applyStates leaves the failed indexes out of the round, fails those
// whose definition this binary cannot evaluate, and notes the paused
// ones (r.paused: they take change records but no scan). stored are the
// stored definitions (their paused flag covers the pending rebuild).
func (r *indexRound) applyStates(stored map[string]*fsmv1.IndexDefinition) error {
	failed, err := failedIndexes(r.b)
	if err != nil {
		return err
	}
	paused := map[uint64]bool{}
	for _, d := range stored {
		if d.Paused {
			paused[d.Id] = true
			if d.Next != nil {
				paused[d.Next.Id] = true
			}
		}
	}
	kept := r.defs[:0]
	for _, d := range r.defs {
		if _, ok := failed[d.Id]; ok {
			continue
		}
		if err := ValidateIndexDefinition(d); err != nil {
			return failIndex(d.Id, "the definition can no longer be evaluated by this server: %v", err)
		}
		if paused[d.Id] {
			if r.paused == nil {
				r.paused = map[uint64]bool{}
			}
			r.paused[d.Id] = true
		}
		kept = append(kept, d)
	}
	r.defs = kept
	return nil
}

// failedIndexes reads the XF records: index id -> reason.
func failedIndexes(r iterReader) (map[uint64]string, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefixIndexFailed, UpperBound: prefixEnd(prefixIndexFailed)})
	if err != nil {
		return nil, err
	}
	var out map[uint64]string
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Key()) != len(prefixIndexFailed)+8 {
			continue
		}
		if out == nil {
			out = map[uint64]string{}
		}
		out[uint64(keySuffixUint64(it.Key()))] = string(it.Value())
	}
	return out, it.Close()
}

// recordFailure commits f's XF record (the round's own batch is dropped),
// notes it in round r (IndexRoundResult.Failed), and wakes the readers
// waiting for the index, which now fail at once.
func (s *Store) recordFailure(ns *namespace, r *indexRound, f *indexFailure) error {
	if err := ns.db.Set(indexFailedKey(f.id), []byte(f.reason), pebble.NoSync); err != nil {
		return fmt.Errorf("record index %d failure: %w", f.id, err)
	}
	r.failed = append(r.failed, f)
	s.indexTotals.failures.Add(1)
	s.indexWake.broadcast()
	return nil
}

// asIndexFailure reports the indexFailure err holds, if any.
func asIndexFailure(err error) (*indexFailure, bool) {
	var f *indexFailure
	return f, errors.As(err, &f)
}

// indexBlocked is the error a read that waits for namespace name's index
// id (of name indexName) gets at once rather than waiting in vain: the
// index failed on this node, or it is paused (the caller checked that
// it does not cover the read yet). Nil otherwise.
func (s *Store) indexBlocked(name, indexName string, id uint64) error {
	ns, err := s.acquire(name)
	if err != nil {
		return err
	}
	defer s.release(ns)
	reason, err := get(ns.db, indexFailedKey(id))
	if err != nil {
		return err
	}
	if reason != nil {
		return fmt.Errorf("%w: index %q: %s (rebuild it)", ErrIndexFailed, indexName, reason)
	}
	v, err := get(ns.db, indexDefKey(indexName))
	if err != nil || v == nil {
		return err
	}
	d := &fsmv1.IndexDefinition{}
	if err := proto.Unmarshal(v, d); err != nil {
		return fmt.Errorf("fsm: index %q: %w", indexName, err)
	}
	if d.Paused {
		return fmt.Errorf("%w: index %q does not hold every event the read must see; resume it, or read at LOCAL consistency (skald index query --local)", ErrIndexPaused, indexName)
	}
	return nil
}

// indexFailureOf is the reason index id failed on this node as the
// view's snapshot holds it ("" when it did not).
func (v *View) indexFailureOf(id uint64) (string, error) {
	val, err := get(v.snap, indexFailedKey(id))
	if err != nil || val == nil {
		return "", err
	}
	return string(val), nil
}

// usableIndex refuses a query of d when it failed on this node.
func (v *View) usableIndex(d *fsmv1.IndexDefinition) error {
	reason, err := v.indexFailureOf(d.Id)
	if err != nil {
		return err
	}
	if reason != "" {
		return fmt.Errorf("%w: index %q: %s (rebuild it)", ErrIndexFailed, d.Name, reason)
	}
	return nil
}

// IndexFailure is an index this node stopped maintaining after an error
// confined to it: its queries fail with ErrIndexFailed until it is
// rebuilt or deleted.
type IndexFailure struct {
	Namespace, Index string
	ID               uint64
	Reason           string
}

// failedIndexes is the failures the round recorded, in namespace name.
func (r *indexRound) failedIndexes(name string) []IndexFailure {
	var out []IndexFailure
	for _, f := range r.failed {
		out = append(out, IndexFailure{Namespace: name, Index: r.names[f.id], ID: f.id, Reason: f.reason})
	}
	return out
}

// FailedIndexes lists the indexes this node stopped maintaining, in every
// namespace _metadata names as indexed, by namespace and index name. An
// index whose name the failure no longer matches (deleted meanwhile) is
// left out.
func (s *Store) FailedIndexes() ([]IndexFailure, error) {
	var out []IndexFailure
	for _, name := range s.IndexedNamespaces() {
		failures, err := s.namespaceFailures(name)
		if errors.Is(err, ErrNamespaceNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return nil, fmt.Errorf("fsm: namespace %q: failed indexes: %w", name, err)
		}
		out = append(out, failures...)
	}
	return out, nil
}

func (s *Store) namespaceFailures(name string) ([]IndexFailure, error) {
	ns, err := s.acquire(name)
	if err != nil {
		return nil, err
	}
	defer s.release(ns)
	snap := ns.db.NewSnapshot()
	defer snap.Close()
	failed, err := failedIndexes(snap)
	if err != nil || len(failed) == 0 {
		return nil, err
	}
	defs, err := loadIndexes(snap)
	if err != nil {
		return nil, err
	}
	var out []IndexFailure
	for _, d := range sortedIndexes(defs) {
		for _, id := range []uint64{d.Id, d.GetNext().GetId()} {
			if reason, ok := failed[id]; ok && id != 0 {
				out = append(out, IndexFailure{Namespace: name, Index: d.Name, ID: id, Reason: reason})
			}
		}
	}
	return out, nil
}
