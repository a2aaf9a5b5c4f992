package node

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
)

// snapshotStore is a raft.SnapshotStore in the Vault style: the state
// machine's Pebble data is the snapshot.
//
//   - List reports one snapshot: the fsm durable floor, so Raft restarts at
//     the floor and replays only what Pebble may lack.
//   - A local snapshot (the sink receives no bytes: stateMachine.Snapshot
//     already synced everything) raises the floor to Raft's snapshot index
//     and copies nothing.
//   - Open streams a fresh checkpoint set of the live state, with its exact
//     size, to a follower that needs one; the meta it returns is the
//     checkpoint's own position, which may be newer than the listed floor.
//   - A sink that receives bytes is an InstallSnapshot from the leader: the
//     stream is extracted into a staging directory as it arrives, and Open
//     of that sink's ID hands the staged set to fsm.Store.Restore, which
//     swaps it in without another copy.
type snapshotStore struct {
	store *fsm.Store
	fs    vfs.FS // the state machine's
	dir   string // <data>/raft/snapshots: checkpoints in and out
	log   *slog.Logger
	m     *metrics

	mu     sync.Mutex
	seq    int
	staged map[string]*fsm.StagedCheckpoint
}

const floorSnapshotID = "fsm-floor"

// newSnapshotStore keeps snapshot transfers under dir on fs, the state
// machine's filesystem (checkpoints are taken and restored on it).
func newSnapshotStore(store *fsm.Store, fs vfs.FS, dir string, log *slog.Logger, m *metrics) (*snapshotStore, error) {
	// Leftovers of a crash mid-transfer are worthless.
	if err := fs.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("node: clear %s: %w", dir, err)
	}
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("node: create %s: %w", dir, err)
	}
	return &snapshotStore{store: store, fs: fs, dir: dir, log: log, m: m, staged: make(map[string]*fsm.StagedCheckpoint)}, nil
}

func (s *snapshotStore) nextPath(kind string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return s.fs.PathJoin(s.dir, fmt.Sprintf("%s-%d", kind, s.seq))
}

// List implements raft.SnapshotStore.
func (s *snapshotStore) List() ([]*raft.SnapshotMeta, error) {
	floor, err := s.store.Floor()
	if err != nil || floor.Index == 0 {
		return nil, err
	}
	meta, err := raftMeta(floorSnapshotID, floor, 0)
	if err != nil {
		return nil, err
	}
	return []*raft.SnapshotMeta{meta}, nil
}

func raftMeta(id string, m fsm.SnapshotMeta, size int64) (*raft.SnapshotMeta, error) {
	meta := &raft.SnapshotMeta{
		Version: raft.SnapshotVersionMax, ID: id, Index: m.Index, Term: m.Term,
		ConfigurationIndex: m.ConfigurationIndex, Size: size,
	}
	if len(m.Configuration) > 0 {
		conf, err := decodeConfiguration(m.Configuration)
		if err != nil {
			return nil, err
		}
		meta.Configuration = conf
	}
	return meta, nil
}

// decodeConfiguration wraps raft.DecodeConfiguration, which panics on bad
// input.
func decodeConfiguration(b []byte) (conf raft.Configuration, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("node: decode stored raft configuration: %v", r)
		}
	}()
	return raft.DecodeConfiguration(b), nil
}

// Create implements raft.SnapshotStore.
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != raft.SnapshotVersionMax {
		return nil, fmt.Errorf("node: unsupported snapshot version %d", version)
	}
	meta := fsm.SnapshotMeta{
		Index: index, Term: term,
		Configuration: raft.EncodeConfiguration(configuration), ConfigurationIndex: configurationIndex,
	}
	return &snapshotSink{st: s, meta: meta, id: fmt.Sprintf("%d-%d-%s", term, index, filepath.Base(s.nextPath("sink")))}, nil
}

// Open implements raft.SnapshotStore.
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	s.mu.Lock()
	staged, ok := s.staged[id]
	delete(s.staged, id)
	s.mu.Unlock()
	if ok {
		meta, err := raftMeta(id, staged.Meta, 0)
		return meta, staged, err
	}
	set, err := s.store.Checkpoint(s.nextPath("out"))
	if err != nil {
		return nil, nil, err
	}
	meta, err := raftMeta(id, set.Meta, set.Size)
	if err != nil {
		set.Remove()
		return nil, nil, err
	}
	s.log.Info("streaming checkpoint to a follower", "index", set.Meta.Index, "bytes", set.Size)
	s.m.snapshots.WithLabelValues("sent").Inc()
	s.m.snapshotBytes.WithLabelValues("sent").Add(float64(set.Size))
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := set.WriteTo(pw)
		pw.CloseWithError(err)
	}()
	return meta, &checkpointReader{PipeReader: pr, set: set, done: done}, nil
}

// checkpointReader streams a checkpoint set and removes it when closed.
type checkpointReader struct {
	*io.PipeReader
	set  *fsm.CheckpointSet
	done chan struct{}
}

func (r *checkpointReader) Close() error {
	r.PipeReader.Close()
	<-r.done
	return r.set.Remove()
}

// snapshotSink is either a local snapshot (no bytes written) or an
// incoming InstallSnapshot stream (bytes written).
type snapshotSink struct {
	st   *snapshotStore
	meta fsm.SnapshotMeta
	id   string

	pw   *io.PipeWriter
	done chan stageResult
	dir  string
}

type stageResult struct {
	staged *fsm.StagedCheckpoint
	err    error
}

func (k *snapshotSink) ID() string { return k.id }

func (k *snapshotSink) Write(p []byte) (int, error) {
	if k.pw == nil {
		pr, pw := io.Pipe()
		k.pw, k.done, k.dir = pw, make(chan stageResult, 1), k.st.nextPath("in")
		go func() {
			staged, err := fsm.StageCheckpoint(k.st.fs, k.dir, pr)
			pr.CloseWithError(err) // unblock the writer if staging failed early
			k.done <- stageResult{staged, err}
		}()
	}
	n, err := k.pw.Write(p)
	k.st.m.snapshotBytes.WithLabelValues("received").Add(float64(n))
	return n, err
}

func (k *snapshotSink) Close() error {
	if k.pw == nil {
		// A local snapshot: the state machine synced everything up to
		// Raft's snapshot index before Persist.
		return k.st.store.RecordFloor(k.meta)
	}
	k.pw.Close()
	r := <-k.done
	if r.err != nil {
		return fmt.Errorf("node: stage incoming snapshot: %w", r.err)
	}
	if r.staged.Meta.Index != k.meta.Index {
		k.st.fs.RemoveAll(k.dir)
		return fmt.Errorf("node: incoming snapshot holds index %d, announced %d", r.staged.Meta.Index, k.meta.Index)
	}
	k.st.mu.Lock()
	k.st.staged[k.id] = r.staged
	k.st.mu.Unlock()
	k.st.m.snapshots.WithLabelValues("received").Inc()
	return nil
}

var errSnapshotCancelled = errors.New("node: snapshot cancelled")

func (k *snapshotSink) Cancel() error {
	if k.pw == nil {
		return nil
	}
	k.pw.CloseWithError(errSnapshotCancelled)
	<-k.done
	return k.st.fs.RemoveAll(k.dir)
}
