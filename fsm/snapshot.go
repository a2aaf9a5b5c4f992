package fsm

import (
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// SnapshotMeta is the Raft position a state reflects: the durable floor, or
// the content of a checkpoint set.
type SnapshotMeta struct {
	Index uint64
	Term  uint64
	// Configuration is the Data of the latest EntryConfiguration applied
	// at Index (nil before the first), from ConfigurationIndex: the node
	// stores raft.EncodeConfiguration bytes there, which fsm never decodes.
	Configuration      []byte
	ConfigurationIndex uint64
}

func (m SnapshotMeta) record() *fsmv1.CheckpointMeta {
	return &fsmv1.CheckpointMeta{Index: m.Index, Term: m.Term, Configuration: m.Configuration, ConfigurationIndex: m.ConfigurationIndex}
}

func metaOf(r *fsmv1.CheckpointMeta) SnapshotMeta {
	return SnapshotMeta{Index: r.Index, Term: r.Term, Configuration: r.Configuration, ConfigurationIndex: r.ConfigurationIndex}
}

// currentMeta is the position of the applied state. Hold applyMu.
func (s *Store) currentMeta() SnapshotMeta {
	return SnapshotMeta{
		Index:              s.applied.Load(),
		Term:               s.appliedTerm.Load(),
		Configuration:      s.config.data,
		ConfigurationIndex: s.config.index,
	}
}

// Floor returns the durable floor recorded by the last SyncFloor (or by a
// restore): every entry at or below its Index survives a power loss. The
// zero value means none was recorded.
func (s *Store) Floor() (SnapshotMeta, error) { return readFloor(s.metaDB()) }

func readFloor(meta *pebble.DB) (SnapshotMeta, error) {
	v, err := get(meta, keyFloor)
	if err != nil || v == nil {
		return SnapshotMeta{}, err
	}
	var r fsmv1.CheckpointMeta
	if err := proto.Unmarshal(v, &r); err != nil {
		return SnapshotMeta{}, fmt.Errorf("fsm: durable floor: %w", err)
	}
	return metaOf(&r), nil
}

// metaDB returns the _metadata database for a read, waiting out a restore.
func (s *Store) metaDB() *pebble.DB {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.mu.restoring {
		s.mu.cond.Wait()
	}
	return s.meta
}

// SyncFloor makes everything applied so far durable and records it as the
// durable floor: it syncs every open namespace database (closed ones were
// synced when they closed), then writes the floor to _metadata with a sync.
// Raft may truncate its log up to the returned Index afterwards.
func (s *Store) SyncFloor() (SnapshotMeta, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if err := s.syncAllLocked(); err != nil {
		return SnapshotMeta{}, err
	}
	meta := s.currentMeta()
	if err := writeFloor(s.meta, meta); err != nil {
		return SnapshotMeta{}, err
	}
	return meta, nil
}

// syncAllLocked syncs the WAL of every open namespace database. Hold
// applyMu.
func (s *Store) syncAllLocked() error {
	s.mu.Lock()
	var open []*namespace
	for ns := s.mu.lru.front; ns != nil; ns = ns.next {
		ns.refs++
		open = append(open, ns)
	}
	s.mu.Unlock()
	var errs []error
	for _, ns := range open {
		if err := ns.db.LogData(nil, pebble.Sync); err != nil {
			errs = append(errs, fmt.Errorf("fsm: sync namespace %q: %w", ns.rec.Name, err))
		}
	}
	s.mu.Lock()
	for _, ns := range open {
		s.releaseLocked(ns)
	}
	s.mu.Unlock()
	return errors.Join(errs...)
}

func writeFloor(meta *pebble.DB, m SnapshotMeta) error {
	v, err := proto.Marshal(m.record())
	if err != nil {
		return err
	}
	if err := meta.Set(keyFloor, v, pebble.Sync); err != nil {
		return fmt.Errorf("fsm: record durable floor: %w", err)
	}
	return nil
}

// RecordFloor raises the durable floor to m when m is above it. The caller
// guarantees that every state change at or below m.Index is durable: Raft's
// snapshot index after SyncFloor returned for the node's FSM snapshot (the
// entries between the last applied command and that index are no-ops and
// barriers, which change no state). A lower m is ignored; at the same index m replaces the floor,
// since Raft's configuration is the authority (raft.RecoverCluster records
// a rewritten one at the index the state machine already synced).
//
// After an interrupted ApplyBatch (see Interrupt) it refuses with
// ErrInterrupted: Raft counts that call's entries as applied, the store
// does not hold them.
func (s *Store) RecordFloor(m SnapshotMeta) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.interrupted.Load() {
		return ErrInterrupted
	}
	cur, err := readFloor(s.meta)
	if err != nil {
		return err
	}
	if m.Index < cur.Index {
		return nil
	}
	return writeFloor(s.meta, m)
}

// Restore replaces the whole state with the checkpoint set read from rc
// (the stream CheckpointSet.WriteTo produced), and closes rc. When rc is a
// *StagedCheckpoint, its already extracted directory is swapped in without
// copying.
func (s *Store) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	staging := stagingDir(s.opts.Dir)
	if staged, ok := rc.(*StagedCheckpoint); ok {
		if staged.Dir != staging {
			if err := s.fs.RemoveAll(staging); err != nil {
				return err
			}
			if err := s.fs.Rename(staged.Dir, staging); err != nil {
				return fmt.Errorf("fsm: restore: move staged checkpoint: %w", err)
			}
		}
	} else if _, err := stageCheckpoint(s.fs, staging, rc); err != nil {
		return err
	}
	if err := markComplete(s.fs, staging); err != nil {
		return err
	}

	// Swap under a quiescent store: no reader may hold a database.
	s.mu.Lock()
	s.mu.restoring = true
	for !s.idleLocked() {
		s.mu.cond.Wait()
	}
	for _, ns := range s.mu.namespaces {
		ns.memIdx.close()
		if err := s.closeNamespaceLocked(ns); err != nil {
			s.log.Error("restore: close namespace", "namespace", ns.rec.Name, "err", err)
		}
	}
	s.mu.namespaces = nil
	s.mu.Unlock()
	err := s.meta.Close()
	if err == nil {
		err = swapIn(s.fs, s.opts.Dir)
	}
	if err == nil {
		err = s.load()
	}
	s.mu.Lock()
	s.mu.restoring = false
	s.mu.cond.Broadcast()
	s.mu.Unlock()
	if err != nil {
		// The store is unusable: the caller (Raft) fails and the node stops.
		return fmt.Errorf("fsm: restore: %w", err)
	}
	s.log.Info("restored checkpoint", "index", s.applied.Load())
	return nil
}

// SetFloorConfiguration replaces the Raft configuration recorded with the
// durable floor. It is for seeding a new node from a backup (the backup's
// configuration names the old cluster's servers); never on a live store.
func SetFloorConfiguration(fs vfs.FS, dir string, configuration []byte) error {
	pc := &pebbleConfig{fs: fs, memTableSize: 1 << 20, log: discardLogger()}
	db, err := pc.open(fs.PathJoin(dir, "_metadata"), "_metadata")
	if err != nil {
		return fmt.Errorf("fsm: open _metadata: %w", err)
	}
	floor, err := readFloor(db)
	if err == nil {
		floor.Configuration = configuration
		err = writeFloor(db, floor)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// RestoreDir seeds the empty or absent state directory dir from the
// checkpoint set read from r, atomically: after a crash dir holds either
// nothing or the whole set. It returns the set's position.
func RestoreDir(fs vfs.FS, dir string, r io.Reader) (SnapshotMeta, error) {
	if entries, err := fs.List(dir); err == nil && len(entries) > 0 {
		return SnapshotMeta{}, fmt.Errorf("fsm: restore into %s: directory is not empty", dir)
	}
	staging := stagingDir(dir)
	meta, err := stageCheckpoint(fs, staging, r)
	if err != nil {
		return SnapshotMeta{}, err
	}
	if err := markComplete(fs, staging); err != nil {
		return SnapshotMeta{}, err
	}
	if err := fs.RemoveAll(dir); err != nil {
		return SnapshotMeta{}, err
	}
	return meta, swapIn(fs, dir)
}
