package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// The type index of every message.
//
// A namespace's type index has one of three states, kept in its database
// (key QF) and changed only by log entries, so that every replica, and
// every replay, holds the same index at the same log position:
//
//   - legacy (no QF key): only tagged messages are indexed (QT), and a
//     query or condition of types alone sees tagged messages only. Every
//     namespace written before this index is legacy, and so is one created
//     while a server of the cluster did not know it.
//   - backfilling (QF: from, cursor): every message written since the
//     entry that started it (global position from and up) is indexed by
//     type in QA; the messages below are being added by a walk of the TI
//     keys that IndexTypes entries continue from cursor. Queries keep the
//     legacy meaning meanwhile (QT is still written for tagged messages).
//   - complete (QF: complete): every message is in QA, and queries and
//     conditions of types read QA, so they see untagged messages too. QT
//     is no longer written (tagged messages are in QA).
//
// A namespace is created complete when the leader stamps
// CreateNamespace.index_all_types, and brought from legacy to complete by
// IndexTypes entries the leader proposes; the leader does either only once
// every server of the cluster reports a state machine that knows them
// (StateMachineVersion), so a replica that ignores them never applies an
// entry that depends on them. Queries never see the backfill half done: a
// namespace switches to the new meaning at the one entry that completes
// the walk.

// StateMachineVersion is what this binary's state machine can apply
// beyond the commands every version knows: 1 adds the type index of every
// message (CreateNamespace.index_all_types, IndexTypes), 2 credentials
// (CreateCredential, RevokeCredential) and user-defined indexes
// (CreateIndex, DeleteIndex: IndexesVersion). A node reports it to its
// peers and the leader records each report (SetNodeInfo); the leader
// proposes what depends on a version only when every server last reported
// at least that version (node/version.go).
const StateMachineVersion = 2

// IndexesVersion is the state machine version that applies CreateIndex,
// DeleteIndex and RebuildIndex (index.go).
const IndexesVersion = 2

// CredentialsVersion is the state machine version that applies
// CreateCredential and RevokeCredential (credential.go).
const CredentialsVersion = 2

// DefaultIndexTypesBatch is the most messages one IndexTypes entry the
// leader proposes walks: about 10-20 ms of apply.
const DefaultIndexTypesBatch = 10000

// typeIndexState is a namespace's type index state (the QF value).
type typeIndexState struct {
	kind   byte   // typeIndexLegacy, typeIndexBackfilling or typeIndexComplete
	from   int64  // backfilling: messages at or above this are indexed
	cursor []byte // backfilling: the next TI key the walk reads (nil: the first)
}

const (
	typeIndexLegacy      byte = 0 // no QF key
	typeIndexBackfilling byte = 1
	typeIndexComplete    byte = 2
)

// complete reports whether queries of types read QA (every message).
func (t typeIndexState) complete() bool { return t.kind == typeIndexComplete }

// indexesAll reports whether a message written now goes into QA.
func (t typeIndexState) indexesAll() bool { return t.kind != typeIndexLegacy }

// encode is the QF value: the kind, then for a backfill the global
// position it started at and its cursor.
//
//	0x02                          complete
//	0x01 from(8) cursor(rest)     backfilling
func (t typeIndexState) encode() []byte {
	if t.kind != typeIndexBackfilling {
		return []byte{t.kind}
	}
	b := make([]byte, 0, 9+len(t.cursor))
	b = append(b, t.kind)
	b = appendUint64(b, uint64(t.from))
	return append(b, t.cursor...)
}

func decodeTypeIndexState(v []byte) (typeIndexState, error) {
	switch {
	case len(v) == 1 && v[0] == typeIndexComplete:
		return typeIndexState{kind: typeIndexComplete}, nil
	case len(v) >= 9 && v[0] == typeIndexBackfilling:
		t := typeIndexState{kind: typeIndexBackfilling, from: int64(binary.BigEndian.Uint64(v[1:9]))}
		if len(v) > 9 {
			t.cursor = bytes.Clone(v[9:])
		}
		return t, nil
	}
	return typeIndexState{}, errCorruptValue
}

// loadTypeIndex reads the state of a namespace's type index from r.
func loadTypeIndex(r getter) (typeIndexState, error) {
	v, err := get(r, keyTypeIndex)
	if err != nil || v == nil {
		return typeIndexState{}, err
	}
	return decodeTypeIndexState(v)
}

// indexTypes applies an IndexTypes entry: it starts the backfill of a
// legacy namespace, walks at most c.MaxKeys of its TI keys writing their
// QA keys, and completes it when the walk reaches the end. The walk reads
// the database, so the batch is committed before it, and after it (a
// later entry of the same call reads the index it wrote).
func (a *applier) indexTypes(l *Entry, c *fsmv1.IndexTypes) any {
	if c.MaxKeys < 1 {
		return invalid("max_keys", "must be at least 1, got %d", c.MaxKeys)
	}
	ns := a.lookup(c.Namespace)
	nb, skipped, done := a.target(l, c.Namespace)
	// The hint follows the namespace's state once the entry is applied,
	// in _metadata under its own skip rule (target opened the database,
	// so the state is loaded even when the namespace part is skipped).
	defer func() {
		if ns != nil && a.touchMeta(l) {
			state := ns.typeIndex
			if nb != nil {
				state = nb.typeIdx
			}
			a.typesIndexedHint(c.Namespace, state.complete())
		}
	}()
	if done {
		return skipped
	}
	res := &fsmv1.IndexTypesResult{Namespace: c.Namespace}
	if nb.typeIdx.complete() {
		res.Complete = true
		return res
	}
	a.flush(nb)
	t := nb.typeIdx
	if t.kind == typeIndexLegacy {
		t = typeIndexState{kind: typeIndexBackfilling, from: nb.nextGP}
	}
	lo := t.cursor
	if lo == nil {
		lo = prefixType
	}
	it, err := nb.ns.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(prefixType)})
	if err != nil {
		a.fatal("namespace %q: type index walk: %v", nb.ns.rec.Name, err)
	}
	ok := it.First()
	for ; ok && res.Walked < c.MaxKeys; ok = it.Next() {
		typ, err := typeOfTypeKey(it.Key())
		if err == nil {
			var gp int64
			if gp, err = decodeUint64(it.Value()); err == nil && gp < t.from {
				nb.key = appendIndexKey(nb.key[:0], prefixTypeAll, typ, gp)
				nb.sets.set(nb.key, nil)
			}
		}
		if err != nil {
			key := bytes.Clone(it.Key()) // the iterator's memory goes with Close
			it.Close()
			a.fatal("namespace %q: type index walk at %q: %v", nb.ns.rec.Name, key, err)
		}
		res.Walked++
	}
	if ok {
		// The next key to read: the walk stopped at its bound.
		t.cursor = bytes.Clone(it.Key())
	} else {
		t = typeIndexState{kind: typeIndexComplete}
		res.Complete = true
	}
	if err := it.Close(); err != nil {
		a.fatal("namespace %q: type index walk: %v", nb.ns.rec.Name, err)
	}
	nb.typeIdx, nb.typeIdxDirty = t, true
	nb.done(l)
	a.flush(nb)
	return res
}

// typeOfTypeKey returns the type of a TI key (TI stream 0x00 type 0x00
// pos).
func typeOfTypeKey(k []byte) (string, error) {
	rest := k[len(prefixType):]
	i := bytes.IndexByte(rest, 0)
	if i < 0 || len(rest) < i+1+1+8 || rest[len(rest)-9] != 0 {
		return "", errCorruptValue
	}
	return string(rest[i+1 : len(rest)-9]), nil
}

// typesIndexedHint records in _metadata (and in memory at commit) whether
// a namespace's type index is complete: the leader proposes IndexTypes
// for the namespaces without it (TypeIndexPending).
func (a *applier) typesIndexedHint(name string, on bool) {
	var err error
	if on {
		err = a.meta.Set(typesIndexedKey(name), nil, nil)
	} else {
		err = a.meta.Delete(typesIndexedKey(name), nil)
	}
	if err != nil {
		a.fatal("stage type index hint: %v", err)
	}
	if a.typesIndexed == nil {
		a.typesIndexed = map[string]bool{}
	}
	a.typesIndexed[name] = on
}

func typesIndexedKey(namespace string) []byte {
	return append(append(make([]byte, 0, len(prefixTypesIndexed)+len(namespace)), prefixTypesIndexed...), namespace...)
}

// TypeIndexPending lists, by name, the namespaces whose type index may not
// hold every message yet (a hint from _metadata; apply decides from each
// namespace's own state): where the leader proposes IndexTypes.
func (s *Store) TypeIndexPending() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name := range s.mu.namespaces {
		if !s.mu.typesIndexed[name] {
			out = append(out, name)
		}
	}
	return out
}

// TypeIndexComplete reports whether the viewed namespace's type index
// holds every message: whether queries and conditions of types alone see
// untagged messages.
func (v *View) TypeIndexComplete() (bool, error) {
	t, err := v.typeIndex()
	return t.complete(), err
}

// typeIndex is the state of the type index as of the view's snapshot.
func (v *View) typeIndex() (typeIndexState, error) {
	t, err := loadTypeIndex(v.snap)
	if err != nil {
		return t, fmt.Errorf("fsm: namespace %q: type index state: %w", v.ns.rec.Name, err)
	}
	return t, nil
}
