package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// PositionExistsError is returned when an import record clashes with a
// stored message (or an earlier record of the same chunk). It matches
// ErrPositionExists with errors.Is.
type PositionExistsError struct {
	Record         int // index of the record in the chunk
	Stream         string
	Position       int64
	GlobalPosition int64
	Reason         string
}

func (e *PositionExistsError) Error() string {
	return fmt.Sprintf("fsm: import record %d (%s)", e.Record, e.Describe())
}

// Describe is the clash as a user reads it, by the record's stream and
// positions (the API names its line).
func (e *PositionExistsError) Describe() string {
	return fmt.Sprintf("stream %q position %d, global position %d: %s", e.Stream, e.Position, e.GlobalPosition, e.Reason)
}

// Is makes errors.Is(err, ErrPositionExists) true.
func (e *PositionExistsError) Is(target error) bool { return target == ErrPositionExists }

// ApplyBatch applies committed entries, in log order, and returns one
// result per entry: the entry's *fsmv1.Result (its Raft index and the
// member of the Result oneof that answers its kind, kinds.go), a business
// error (errors.go), or nil for an entry that changes no state (a
// configuration entry, or one skipped because the database already holds
// it: replay after restart). All entries of the call become one Pebble batch per
// touched namespace database (plus one for _metadata when namespaces or
// nodes change), each ending with its A record. It keeps no reference to
// entries or their bytes after it returns.
//
// Storage errors. A resource error (IsResourceError: no file descriptor,
// no space; typically opening a namespace's database, or reading one)
// makes the call wait and retry: what it staged is dropped, the in-memory
// state of every namespace it touched is reloaded from the databases, and
// after a backoff the entries are applied again (Stall reports the wait;
// so does the log, saying what to free). The retry computes exactly what
// the first attempt would have: databases commit atomically with their A
// record, so entries the first attempt committed (imports and deletions
// commit part way through a call) are skipped by the skip rule and keep
// the first attempt's results, and every other entry is applied again to
// the same committed state. One case is not retried: when the entry being
// applied had already committed part of its own effects (an expiry entry
// commits between its walks), applying it again could differ, so the node
// stops as for any other storage error: ApplyBatch panics, since skipping
// the entry would let replicas diverge. Interrupt ends the wait (see
// there); the call then applies nothing and answers ErrInterrupted.
func (s *Store) ApplyBatch(entries []Entry) []any {
	out := make([]any, len(entries))
	if len(entries) == 0 {
		return out
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.interrupted.Load() {
		return interruptedResults(out)
	}
	a := &applier{s: s, batches: make(map[*namespace]*nsBatch)}
	if err := a.run(entries, out, nil); err != nil {
		// Wait for the resource and apply the call again (no closure on
		// the path without an error).
		pending := a.abort() // handles the abandoned attempt created
		err = s.waiter.retryAfter(err, IsResourceError, func() error {
			var prev []any
			prev, out = out, make([]any, len(entries))
			a := &applier{s: s, batches: make(map[*namespace]*nsBatch), pending: pending}
			err := a.run(entries, out, prev)
			if err != nil {
				pending = a.abort()
			}
			return err
		})
		if err != nil {
			// Interrupted while waiting: nothing of the call is in memory,
			// and the databases hold at most a prefix of it that the skip
			// rule passes over on the next start.
			s.interrupted.Store(true)
			s.closePending(pending)
			return interruptedResults(out)
		}
	}
	last := &entries[len(entries)-1]
	s.applied.Store(last.Index)
	s.appliedTerm.Store(last.Term)
	return out
}

func interruptedResults(out []any) []any {
	for i := range out {
		out[i] = ErrInterrupted
	}
	return out
}

// run applies entries into out and commits them. A resource error that
// may be retried (see ApplyBatch) is returned; the caller then abandons
// the attempt with abort. Any other storage failure panics. prev holds the
// results of an abandoned attempt: an entry that attempt committed is now
// skipped, and keeps its result from then.
func (a *applier) run(entries []Entry, out, prev []any) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		rerr, ok := r.(error)
		if !ok || !IsResourceError(rerr) || a.committing || a.partial {
			panic(r)
		}
		err = rerr
	}()
	for i := range entries {
		l := &entries[i]
		a.cur, a.partial = l.Index, false
		switch l.Kind {
		case EntryCommand:
			out[i] = a.command(l)
		case EntryConfiguration:
			a.configuration(l)
		}
		if out[i] == nil && prev != nil {
			out[i] = prev[i]
		}
	}
	a.committing = true
	a.commit()
	return nil
}

// abort drops what an abandoned attempt staged: its batches, its
// references, and (by marking them stale) the in-memory state of the
// namespaces it touched. It returns the handles the attempt created for
// namespaces not registered yet, which the next attempt reuses (their
// databases are open, and a second handle could not open them).
func (a *applier) abort() map[uint64]*namespace {
	s := a.s
	for _, nb := range a.order {
		nb.close()
	}
	if a.meta != nil {
		a.meta.Close()
	}
	pending := a.pending
	if pending == nil {
		pending = make(map[uint64]*namespace)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, nb := range a.order {
		ns := nb.ns
		ns.stale = true
		if s.mu.namespaces[ns.rec.Name] != ns {
			pending[ns.rec.Id] = ns
		}
		s.releaseLocked(ns)
	}
	return pending
}

// closePending closes the handles of namespaces an abandoned ApplyBatch
// created and no later call registered.
func (s *Store) closePending(pending map[uint64]*namespace) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range pending {
		if s.mu.namespaces[ns.rec.Name] == ns || ns.refs > 0 {
			continue
		}
		ns.memIdx.close()
		if err := s.closeNamespaceLocked(ns); err != nil {
			s.log.Error("close namespace of an interrupted apply", "namespace", ns.rec.Name, "err", err)
		}
	}
}

// applier holds the state of one ApplyBatch call.
type applier struct {
	s       *Store
	batches map[*namespace]*nsBatch
	order   []*nsBatch
	// rules are the input rules of the entry being applied
	// (Command.input_rules).
	rules uint32

	// _metadata changes, committed after the namespace batches.
	meta        *pebble.Batch
	metaApplied appliedRecord
	metaSync    bool // a namespace was deleted: make that durable before its directory goes
	config      *configRecord
	nodes       map[string]string
	// nodeVersions: recorded versions set (> 0) or dropped (0).
	nodeVersions map[string]uint32
	retained     map[string]bool // retention hints set (true) or dropped
	// typesIndexed: type index hints set (true) or dropped.
	typesIndexed map[string]bool
	// credentials: the credentials of the namespaces whose credentials
	// the call changed, as of the current entry (credential.go).
	credentials map[*namespace]map[uint64]*fsmv1.CredentialRecord

	// Registry changes, published after commit.
	created map[string]*namespace // name -> handle created in this call
	deleted map[string]bool       // names deleted in this call (and not re-created since)
	dropped []*namespace          // handles to close and remove
	pending map[uint64]*namespace // handles an abandoned attempt created, by id

	// What a storage error may still be retried after (ApplyBatch).
	cur        uint64 // index of the entry being applied
	partial    bool   // that entry committed part of its effects already
	committing bool   // the final commit has begun
	// mark is the batch the current entry writes to, and how much it
	// held when the entry began or last committed (see flush).
	mark struct {
		nb   *nsBatch
		ops  uint32
		sets int
	}
}

// storageError is apply's panic on a storage failure: what failed, and
// the error (Unwrap) when one was given. ApplyBatch retries resource
// errors; the rest stop the node.
type storageError struct {
	what  string
	cause error
}

func (e *storageError) Error() string { return "fsm: storage failure, stopping: " + e.what }
func (e *storageError) Unwrap() error { return e.cause }

// fatal panics with a storageError; its cause is the last error in args.
func (a *applier) fatal(format string, args ...any) { stopOnStorage(format, args...) }

// stopOnStorage panics with a storageError (format as fmt.Sprintf, %v
// for errors); its cause is the last error in args, so ApplyBatch tells a
// resource error it waits out from one that stops the node. Every storage
// failure inside apply goes through it.
func stopOnStorage(format string, args ...any) {
	e := &storageError{what: fmt.Sprintf(format, args...)}
	for _, arg := range args {
		if err, ok := arg.(error); ok {
			e.cause = err
		}
	}
	panic(e)
}

func (a *applier) command(l *Entry) any {
	cmd := &fsmv1.Command{}
	if err := proto.Unmarshal(l.Data, cmd); err != nil {
		return fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	a.rules = cmd.InputRules
	k, ok := kinds[reflect.TypeOf(cmd.Kind)]
	if !ok {
		return fmt.Errorf("%w: unknown command kind %T", ErrBadCommand, cmd.Kind)
	}
	return k.answer(l.Index, k.apply(a, l, cmd))
}

// lookup resolves a namespace name as of the current entry.
func (a *applier) lookup(name string) *namespace {
	if ns, ok := a.created[name]; ok {
		return ns
	}
	if a.deleted[name] {
		return nil
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	return a.s.mu.namespaces[name]
}

// batch returns the open batch of ns, taking a reference (and opening the
// database) on first use, and marks it as the current entry's (see flush).
func (a *applier) batch(ns *namespace) *nsBatch {
	nb, ok := a.batches[ns]
	if !ok {
		a.s.mu.Lock()
		err := a.s.refLocked(ns)
		if err == nil && ns.stale {
			if err = ns.load(ns.db); err != nil {
				a.s.releaseLocked(ns)
			}
		}
		a.s.mu.Unlock()
		if err != nil {
			a.fatal("%v", err)
		}
		nb = newNSBatch(ns, a.s.idfLoadBefore)
		a.batches[ns] = nb
		a.order = append(a.order, nb)
	}
	a.markBatch(nb)
	return nb
}

// markBatch records what nb holds, so that flush can tell whether a commit
// takes part of the current entry's effects along.
func (a *applier) markBatch(nb *nsBatch) {
	a.mark.nb, a.mark.ops, a.mark.sets = nb, nb.b.Count(), len(nb.sets.kvs)
}

// target returns the batch of the namespace entry l writes to. done is set,
// with the entry's result, when the entry must not be applied: the
// namespace does not exist, or it already holds the entry (see skip).
func (a *applier) target(l *Entry, name string) (nb *nsBatch, result any, done bool) {
	ns := a.lookup(name)
	if ns == nil {
		return nil, ErrNamespaceNotFound, true
	}
	nb = a.batch(ns)
	if skip(ns, nb, l) {
		return nil, nil, true
	}
	return nb, nil, false
}

// skip reports whether entry l is already held by ns: at or below its A
// index, or older than this incarnation of the name (an entry for an
// earlier namespace of the same name, replayed after the name was deleted
// and created again).
func skip(ns *namespace, nb *nsBatch, l *Entry) bool {
	return l.Index <= nb.applied.index || l.Index <= ns.rec.Id
}

// touchMeta starts the _metadata batch, reporting false when the entry is
// already held there.
func (a *applier) touchMeta(l *Entry) bool {
	if l.Index <= a.s.metaApplied.index {
		return false
	}
	if a.meta == nil {
		a.meta = a.s.meta.NewBatch()
	}
	a.metaApplied = appliedRecord{l.Index, l.Term}
	return true
}

func (a *applier) configuration(l *Entry) {
	if !a.touchMeta(l) {
		return
	}
	a.config = &configRecord{index: l.Index, data: append([]byte(nil), l.Data...)}
	v := appendUint64(make([]byte, 0, 8+len(l.Data)), l.Index)
	if err := a.meta.Set(keyConfig, append(v, l.Data...), nil); err != nil {
		a.fatal("stage configuration: %v", err)
	}
}

func (a *applier) append(l *Entry, c *fsmv1.Append) any {
	nb, skipped, done := a.target(l, c.Namespace)
	if done {
		return skipped
	}
	if err := a.check().append(c); err != nil {
		return err
	}
	if err := nb.checkConditionAfter(c.Condition); err != nil {
		return err
	}
	// idsDecidedByLeader is false outside mutant builds; a mutant's bug is
	// that apply trusts the leader's decision.
	if !idsDecidedByLeader(l) {
		if dup, err := nb.checkIDs(c); err != nil {
			return err
		} else if dup != nil {
			return dup
		}
	}
	st := nb.stream(c.Stream)
	if st.meta.flags&streamHardDeleted != 0 {
		return fmt.Errorf("%w: %q", ErrStreamDeleted, c.Stream)
	}
	version := st.meta.lastPos
	if c.ExpectedVersion != nil && *c.ExpectedVersion != version {
		return &VersionConflictError{Stream: c.Stream, Expected: *c.ExpectedVersion, Actual: version}
	}
	// conditionDecidedByLeader is false outside mutant builds; a mutant's
	// bug is that apply trusts the leader's verdict.
	if !conditionDecidedByLeader(l) {
		if err := a.checkCondition(nb, c.Condition); err != nil {
			return err
		}
	}
	if gp := proposedGlobal(l); gp > 0 {
		nb.nextGP = gp // a mutant's bug: the leader's guess is trusted
	}
	if err := checkStreamRoom("stream", version, len(c.Messages)); err != nil {
		return err
	}
	if err := checkGlobalRoom(nb.nextGP, len(c.Messages)); err != nil {
		return err
	}
	res := &fsmv1.AppendResult{
		Namespace:           c.Namespace,
		Stream:              c.Stream,
		FirstPosition:       version + 1,
		FirstGlobalPosition: nb.nextGP,
	}
	ce := nb.catEntryFor(c.Stream)
	sm := &nb.sm
	for _, m := range c.Messages {
		proto.Reset(sm)
		sm.Id, sm.Stream, sm.Type, sm.Position = m.Id, c.Stream, m.Type, st.meta.lastPos+1
		sm.Data, sm.Metadata, sm.TimeUnixNano, sm.Tags = m.Data, NormalizeMetadata(m.Metadata), c.TimeUnixNano, m.Tags
		nb.writeMessage(ce, sm, nb.nextGP, st)
		nb.nextGP++
	}
	res.LastPosition = st.meta.lastPos
	res.LastGlobalPosition = nb.nextGP - 1
	nb.recordIDs(c, res.FirstPosition, res.FirstGlobalPosition)
	nb.done(l)
	return res
}

func (a *applier) importChunk(l *Entry, c *fsmv1.Import) any {
	nb, skipped, done := a.target(l, c.Namespace)
	if done {
		return skipped
	}
	if err := validateImport(c, a.rules); err != nil {
		return err
	}
	// Clash checks read the database, so make it hold everything staged so
	// far; imports are rare and large, an extra commit costs little.
	a.flush(nb)
	if c.Clear {
		nb.clear()
	}
	if err := nb.checkImport(c); err != nil {
		if c.Clear {
			// The chunk is rejected as a whole, clear included.
			nb.reset()
		}
		return err
	}
	if c.Clear {
		a.logChange(nb, changeCleared, 0, 0)
	}
	// Records below the next global position may fall below an index
	// loop's checkpoint: the loop indexes them from the change log.
	below := nb.nextGP
	res := &fsmv1.ImportResult{Namespace: c.Namespace, Imported: int64(len(c.Messages))}
	for _, m := range c.Messages {
		st := nb.stream(m.Stream)
		nb.writeMessage(nb.catEntryFor(m.Stream), &fsmv1.StoredMessage{
			Id:           m.Id,
			Stream:       m.Stream,
			Type:         m.Type,
			Position:     m.Position,
			Data:         m.Data,
			Metadata:     NormalizeMetadata(m.Metadata),
			TimeUnixNano: m.TimeUnixNano,
			Tags:         m.Tags,
		}, m.GlobalPosition, st)
		if m.GlobalPosition < below {
			a.logChange(nb, changeAdded, m.GlobalPosition, m.GlobalPosition)
		}
		nb.nextGP = max(nb.nextGP, m.GlobalPosition+1)
		res.LastGlobalPosition = m.GlobalPosition
	}
	nb.done(l)
	return res
}

// validateImport checks an import chunk under the entry's input rules.
// Whatever the rules, no position or global position passes MaxPosition.
func validateImport(c *fsmv1.Import, rules uint32) error {
	if n := len(c.Messages); n > MaxImportMessages {
		return invalid("messages", "must hold at most %d records, got %d", MaxImportMessages, n)
	}
	limit := int64(MaxPosition)
	if rules >= InputRulesStrict {
		limit = MaxImportedPosition
	}
	ck := inputCheck{rules: rules, stamped: true}
	for i, m := range c.Messages {
		if err := ValidateStreamName(fmt.Sprintf("messages[%d].stream", i), m.Stream); err != nil {
			return err
		}
		if m.Position < 0 || m.Position > limit {
			return invalid(fmt.Sprintf("messages[%d].position", i), "must be 0..%d, got %d", limit, m.Position)
		}
		if m.GlobalPosition < 1 || m.GlobalPosition > limit {
			return invalid(fmt.Sprintf("messages[%d].global_position", i), "must be 1..%d, got %d", limit, m.GlobalPosition)
		}
		if err := ck.message("messages", i, m.Id, m.Type, m.Data, m.Metadata, m.Tags); err != nil {
			return err
		}
	}
	return nil
}

// flush commits what nb staged so far, so the database holds it. When the
// current entry has staged writes in nb and is not done, the commit holds
// part of its effects without its A record: from then on a storage error
// in this entry is not retried (ApplyBatch).
func (a *applier) flush(nb *nsBatch) {
	if nb.dirty && a.mark.nb == nb && nb.applied.index < a.cur &&
		(nb.b.Count() != a.mark.ops || len(nb.sets.kvs) != a.mark.sets) {
		a.partial = true
	}
	a.committing = true
	if err := nb.commit(a.s.opts.SyncApply); err != nil {
		a.fatal("namespace %q: %v", nb.ns.rec.Name, err)
	}
	a.committing = false
	if a.mark.nb == nb {
		a.markBatch(nb)
	}
	if a.s.afterFlush != nil {
		a.s.afterFlush()
	}
}

func (a *applier) createNamespace(l *Entry, c *fsmv1.CreateNamespace) any {
	validateName := ValidateNamespaceName
	if a.rules >= InputRulesStrict {
		validateName = ValidateNewNamespaceName
	}
	if err := validateName(c.Name); err != nil {
		return err
	}
	if err := ValidateDedupeWindow(c.DedupeWindowNanos); err != nil {
		return err
	}
	if l.Index <= a.s.metaApplied.index {
		return nil // _metadata already holds this entry
	}
	if a.lookup(c.Name) != nil {
		return ErrNamespaceExists
	}
	if c.MaxNamespaces > 0 && a.namespaceCount() >= c.MaxNamespaces {
		return &NamespaceLimitError{Name: c.Name, Limit: c.MaxNamespaces}
	}
	a.touchMeta(l)
	rec := &fsmv1.NamespaceRecord{
		Name:              c.Name,
		Id:                l.Index,
		Description:       c.Description,
		TokenHash:         c.TokenHash,
		CreatedUnixNano:   c.CreatedUnixNano,
		DedupeWindowNanos: c.DedupeWindowNanos,
	}
	v, err := proto.Marshal(rec)
	if err != nil {
		a.fatal("encode namespace record: %v", err)
	}
	if err := a.meta.Set(namespaceKey(c.Name), v, nil); err != nil {
		a.fatal("stage namespace record: %v", err)
	}
	ns := a.pending[l.Index]
	if ns == nil {
		ns = a.s.newNamespace(rec)
	}
	nb := a.batch(ns) // opens (creates) its database
	if nb.applied.index < l.Index {
		if c.IndexAllTypes {
			nb.typeIdx, nb.typeIdxDirty = typeIndexState{kind: typeIndexComplete}, true
		}
		nb.done(l)
	}
	if c.IndexAllTypes {
		a.typesIndexedHint(c.Name, true)
	}
	if a.created == nil {
		a.created = make(map[string]*namespace)
	}
	a.created[c.Name] = ns
	return &fsmv1.CreateNamespaceResult{Name: c.Name, Id: l.Index, CreatedUnixNano: c.CreatedUnixNano}
}

// namespaceCount is the number of namespaces as of the current entry: the
// registry, less the names this call deleted, plus those it created (a
// created name in the registry was deleted first, so it is counted once).
func (a *applier) namespaceCount() int64 {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	n := len(a.s.mu.namespaces) + len(a.created)
	for name := range a.deleted {
		if _, ok := a.s.mu.namespaces[name]; ok {
			n--
		}
	}
	return int64(n)
}

func (a *applier) deleteNamespace(l *Entry, c *fsmv1.DeleteNamespace) any {
	if l.Index <= a.s.metaApplied.index {
		return nil // _metadata already holds this entry
	}
	ns := a.lookup(c.Name)
	if ns == nil {
		return ErrNamespaceNotFound
	}
	a.touchMeta(l)
	nb := a.batch(ns)
	nb.dropped = true
	res := &fsmv1.DeleteNamespaceResult{Name: c.Name, MessagesDeleted: nb.counts.messages, DeletedUnixNano: c.DeletedUnixNano}
	if err := a.meta.Delete(namespaceKey(c.Name), nil); err != nil {
		a.fatal("stage namespace delete: %v", err)
	}
	a.metaSync = true
	a.dropCredentials(ns)
	a.retainedHint(c.Name, false)
	a.typesIndexedHint(c.Name, false)
	if err := a.meta.Delete(indexedHintKey(c.Name), nil); err != nil {
		a.fatal("stage index hint: %v", err)
	}
	delete(a.created, c.Name)
	if a.deleted == nil {
		a.deleted = make(map[string]bool)
	}
	a.deleted[c.Name] = true
	a.dropped = append(a.dropped, ns)
	return res
}

func (a *applier) setNodeInfo(l *Entry, c *fsmv1.SetNodeInfo) any {
	if c.NodeId == "" {
		return invalid("node_id", "must not be empty")
	}
	if !a.touchMeta(l) {
		return nil
	}
	var err error
	if c.ApiAddress == "" {
		err = errors.Join(a.meta.Delete(nodeKey(c.NodeId), nil), a.meta.Delete(nodeVersionKey(c.NodeId), nil))
	} else {
		err = a.meta.Set(nodeKey(c.NodeId), []byte(c.ApiAddress), nil)
	}
	if err != nil {
		a.fatal("stage node info: %v", err)
	}
	if a.nodes == nil {
		a.nodes = make(map[string]string)
	}
	a.nodes[c.NodeId] = c.ApiAddress
	// The version is recorded as reported, lower or higher: the record is
	// what the member last said. 0 says nothing and keeps the record.
	switch v := c.StateMachineVersion; {
	case c.ApiAddress == "":
		a.noteNodeVersion(c.NodeId, 0) // removed with the address
	case v > 0:
		if err := a.meta.Set(nodeVersionKey(c.NodeId), binary.BigEndian.AppendUint32(nil, v), nil); err != nil {
			a.fatal("stage node version: %v", err)
		}
		a.noteNodeVersion(c.NodeId, v)
	}
	return true // Result.set_node_info
}

// noteNodeVersion stages member id's recorded version for commit (0:
// dropped).
func (a *applier) noteNodeVersion(id string, v uint32) {
	if a.nodeVersions == nil {
		a.nodeVersions = make(map[string]uint32)
	}
	a.nodeVersions[id] = v
}

// commit makes the call's effects durable (as configured) and visible:
// namespace batches first, then _metadata, then the in-memory registry.
func (a *applier) commit() {
	s := a.s
	for _, nb := range a.order {
		if !nb.dropped {
			a.flush(nb)
		}
		nb.close()
	}
	if a.meta != nil {
		if err := a.meta.Set(keyApplied, a.metaApplied.encode(), nil); err != nil {
			a.fatal("stage _metadata applied: %v", err)
		}
		opts := pebble.NoSync
		if a.metaSync || s.opts.SyncApply {
			opts = pebble.Sync
		}
		if err := s.meta.Apply(a.meta, opts); err != nil {
			a.fatal("commit _metadata: %v", err)
		}
		a.meta.Close()
		s.metaApplied = a.metaApplied
		if a.config != nil {
			s.config = *a.config
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for name, ns := range a.created {
		s.mu.namespaces[name] = ns
	}
	for _, ns := range a.dropped {
		if cur, ok := s.mu.namespaces[ns.rec.Name]; ok && cur == ns {
			delete(s.mu.namespaces, ns.rec.Name)
		}
		ns.deleted = true
	}
	for name, on := range a.retained {
		if on {
			s.mu.retained[name] = true
		} else {
			delete(s.mu.retained, name)
		}
	}
	for name, on := range a.typesIndexed {
		if on {
			s.mu.typesIndexed[name] = true
		} else {
			delete(s.mu.typesIndexed, name)
		}
	}
	for ns, m := range a.credentials {
		ns.creds = m
	}
	for id, addr := range a.nodes {
		if addr == "" {
			delete(s.mu.nodes, id)
		} else {
			s.mu.nodes[id] = addr
		}
	}
	for id, v := range a.nodeVersions {
		if v == 0 {
			delete(s.mu.nodeVersions, id)
		} else {
			s.mu.nodeVersions[id] = v
		}
	}
	for _, nb := range a.order {
		s.releaseLocked(nb.ns)
	}
}
