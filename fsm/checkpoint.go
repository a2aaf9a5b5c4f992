package fsm

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/durable"
)

// A checkpoint set is a directory holding a Pebble checkpoint of every
// database at one Raft index, plus its position:
//
//	CHECKPOINT                 CheckpointMeta (protobuf)
//	_metadata/...              checkpoint of _metadata
//	ns/<16 hex id>/...         checkpoint of each namespace
//
// It travels as a tar stream (USTAR, regular files only, fixed header
// fields) whose length is known before the first byte is written, as Raft's
// InstallSnapshot requires.
const (
	checkpointFile = "CHECKPOINT"
	completeFile   = "COMPLETE" // a fully staged set, ready to swap in
)

// CheckpointSet is a consistent checkpoint of all databases.
type CheckpointSet struct {
	Meta SnapshotMeta
	Dir  string
	// Size is the exact length in bytes of the stream WriteTo writes.
	Size int64

	fs    vfs.FS
	files []checkpointEntry // sorted by name
}

type checkpointEntry struct {
	name string // slash-separated, relative to Dir
	size int64
}

// Checkpoint writes a consistent checkpoint set of the whole store into
// dir, which must not exist. Apply is paused while the databases are
// checkpointed (hard links where the filesystem allows), so every database
// reflects exactly Meta.Index. Remove the set when done.
func (s *Store) Checkpoint(dir string) (*CheckpointSet, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if _, err := s.fs.Stat(dir); err == nil {
		return nil, fmt.Errorf("fsm: checkpoint: %s already exists", dir)
	}
	if err := s.fs.MkdirAll(s.fs.PathJoin(dir, "ns"), 0o700); err != nil {
		return nil, fmt.Errorf("fsm: checkpoint: %w", err)
	}
	set, err := s.checkpointLocked(dir)
	if err != nil {
		s.fs.RemoveAll(dir)
		return nil, err
	}
	return set, nil
}

func (s *Store) checkpointLocked(dir string) (*CheckpointSet, error) {
	meta := s.currentMeta()
	if err := s.meta.Checkpoint(s.fs.PathJoin(dir, "_metadata"), pebble.WithFlushedWAL()); err != nil {
		return nil, fmt.Errorf("fsm: checkpoint _metadata: %w", err)
	}
	s.mu.Lock()
	names := make([]string, 0, len(s.mu.namespaces))
	for name := range s.mu.namespaces {
		names = append(names, name)
	}
	s.mu.Unlock()
	for _, name := range names {
		ns, err := s.acquire(name)
		if err != nil {
			return nil, err
		}
		err = ns.db.Checkpoint(s.fs.PathJoin(dir, "ns", ns.dirName()), pebble.WithFlushedWAL())
		s.release(ns)
		if err != nil {
			return nil, fmt.Errorf("fsm: checkpoint namespace %q: %w", name, err)
		}
	}
	if err := durable.WriteFile(s.fs, s.fs.PathJoin(dir, checkpointFile), mustMarshal(meta.record())); err != nil {
		return nil, err
	}
	return openCheckpointSet(s.fs, dir, meta)
}

// openCheckpointSet lists the files of a set and computes its stream size.
func openCheckpointSet(fs vfs.FS, dir string, meta SnapshotMeta) (*CheckpointSet, error) {
	set := &CheckpointSet{Meta: meta, Dir: dir, fs: fs}
	var walk func(rel string) error
	walk = func(rel string) error {
		names, err := fs.List(fs.PathJoin(dir, rel))
		if err != nil {
			return err
		}
		for _, n := range names {
			r := n
			if rel != "" {
				r = rel + "/" + n
			}
			st, err := fs.Stat(fs.PathJoin(dir, r))
			if err != nil {
				return err
			}
			if st.IsDir() {
				if err := walk(r); err != nil {
					return err
				}
				continue
			}
			set.files = append(set.files, checkpointEntry{name: r, size: st.Size()})
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, fmt.Errorf("fsm: list checkpoint %s: %w", dir, err)
	}
	sort.Slice(set.files, func(i, j int) bool { return set.files[i].name < set.files[j].name })
	for _, f := range set.files {
		set.Size += tarBlock + (f.size+tarBlock-1)/tarBlock*tarBlock
	}
	set.Size += 2 * tarBlock // end-of-archive marker
	return set, nil
}

const tarBlock = 512

// tarEpoch is the modification time of every entry, so a set's stream
// depends only on its files' names and bytes.
var tarEpoch = time.Unix(0, 0)

// WriteTo streams the set as a tar archive of exactly Size bytes.
func (c *CheckpointSet) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	tw := tar.NewWriter(cw)
	for _, f := range c.files {
		if err := c.writeFile(tw, f); err != nil {
			return cw.n, err
		}
	}
	if err := tw.Close(); err != nil {
		return cw.n, err
	}
	if cw.n != c.Size {
		return cw.n, fmt.Errorf("fsm: checkpoint stream is %d bytes, announced %d", cw.n, c.Size)
	}
	return cw.n, nil
}

func (c *CheckpointSet) writeFile(tw *tar.Writer, f checkpointEntry) error {
	hdr := &tar.Header{
		Typeflag: tar.TypeReg, Name: f.name, Size: f.size, Mode: 0o600,
		ModTime: tarEpoch, Format: tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("fsm: checkpoint %s: %w", f.name, err)
	}
	file, err := c.fs.Open(c.fs.PathJoin(c.Dir, f.name))
	if err != nil {
		return err
	}
	defer file.Close()
	if n, err := io.Copy(tw, io.LimitReader(file, f.size)); err != nil {
		return err
	} else if n != f.size {
		return fmt.Errorf("fsm: checkpoint %s: file shrank from %d to %d bytes", f.name, f.size, n)
	}
	return nil
}

// Remove deletes the set's directory.
func (c *CheckpointSet) Remove() error { return c.fs.RemoveAll(c.Dir) }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// StagedCheckpoint is a checkpoint set already extracted into Dir (by
// StageCheckpoint, in a snapshot sink). Handed to Store.Restore as the
// reader, its directory is moved into place without copying.
type StagedCheckpoint struct {
	Dir  string
	Meta SnapshotMeta
}

func (*StagedCheckpoint) Read([]byte) (int, error) { return 0, io.EOF }
func (*StagedCheckpoint) Close() error             { return nil }

// StageCheckpoint extracts the checkpoint stream r into dir (replacing
// anything there), syncs it, and records its position as the set's durable
// floor, so the set is ready to be swapped in.
func StageCheckpoint(fs vfs.FS, dir string, r io.Reader) (*StagedCheckpoint, error) {
	meta, err := stageCheckpoint(fs, dir, r)
	if err != nil {
		return nil, err
	}
	return &StagedCheckpoint{Dir: dir, Meta: meta}, nil
}

func stageCheckpoint(fs vfs.FS, dir string, r io.Reader) (SnapshotMeta, error) {
	if err := fs.RemoveAll(dir); err != nil {
		return SnapshotMeta{}, err
	}
	if err := durable.MkdirAll(fs, fs.PathJoin(dir, "ns")); err != nil {
		return SnapshotMeta{}, err
	}
	fail := func(err error) (SnapshotMeta, error) {
		fs.RemoveAll(dir)
		return SnapshotMeta{}, fmt.Errorf("fsm: stage checkpoint: %w", err)
	}
	tr := tar.NewReader(r)
	var meta *fsmv1.CheckpointMeta
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(err)
		}
		if hdr.Typeflag != tar.TypeReg || !validCheckpointName(hdr.Name) {
			return fail(fmt.Errorf("unexpected entry %q", hdr.Name))
		}
		path := fs.PathJoin(dir, hdr.Name)
		if err := durable.MkdirAll(fs, fs.PathDir(path)); err != nil {
			return fail(err)
		}
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil {
			return fail(err)
		}
		if hdr.Name == checkpointFile {
			meta = &fsmv1.CheckpointMeta{}
			if err := proto.Unmarshal(data, meta); err != nil {
				return fail(fmt.Errorf("%s: %w", checkpointFile, err))
			}
		}
		if err := durable.WriteFile(fs, path, data); err != nil {
			return fail(err)
		}
	}
	if meta == nil {
		return fail(fmt.Errorf("no %s entry", checkpointFile))
	}
	// The checkpoint is synced, so its position is its durable floor.
	pc := &pebbleConfig{fs: fs, memTableSize: 1 << 20, log: discardLogger()}
	db, err := pc.open(fs.PathJoin(dir, "_metadata"), "_metadata")
	if err != nil {
		return fail(err)
	}
	err = writeFloor(db, metaOf(meta))
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	return metaOf(meta), nil
}

// validCheckpointName accepts only the layout of a set: no absolute paths,
// no "..", nothing outside CHECKPOINT, _metadata/ and ns/<id>/.
func validCheckpointName(name string) bool {
	if name == checkpointFile {
		return true
	}
	parts := strings.Split(name, "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return false
		}
	}
	switch {
	case parts[0] == "_metadata":
		return len(parts) == 2
	case parts[0] == "ns":
		return len(parts) == 3 && len(parts[1]) == 16 && strings.Trim(parts[1], "0123456789abcdef") == ""
	}
	return false
}

func markComplete(fs vfs.FS, staging string) error {
	return durable.WriteFile(fs, fs.PathJoin(staging, completeFile), nil)
}

func stagingDir(dir string) string { return dir + ".restore" }
func oldDir(dir string) string     { return dir + ".old" }

// swapIn replaces dir with its complete staging directory. The steps are
// ordered so that finishRestore can complete or undo them after a crash:
// dir -> dir.old, staging -> dir, remove dir.old.
func swapIn(fs vfs.FS, dir string) error {
	old := oldDir(dir)
	if err := fs.RemoveAll(old); err != nil {
		return err
	}
	if _, err := fs.Stat(dir); err == nil {
		if err := fs.Rename(dir, old); err != nil {
			return fmt.Errorf("fsm: restore: move aside %s: %w", dir, err)
		}
	}
	if err := fs.Rename(stagingDir(dir), dir); err != nil {
		return fmt.Errorf("fsm: restore: move staged set into %s: %w", dir, err)
	}
	if err := durable.SyncDir(fs, fs.PathDir(dir)); err != nil {
		return err
	}
	return fs.RemoveAll(old)
}

// finishRestore completes or rolls back a restore a crash interrupted.
func finishRestore(fs vfs.FS, dir string) error {
	if err := durable.MkdirAll(fs, fs.PathDir(dir)); err != nil {
		return fmt.Errorf("fsm: create parent of %s: %w", dir, err)
	}
	staging, old := stagingDir(dir), oldDir(dir)
	exists := func(p string) bool { _, err := fs.Stat(p); return err == nil }
	complete := exists(fs.PathJoin(staging, completeFile))
	switch {
	case !exists(dir) && complete:
		// Crashed between the two renames: finish.
		if err := fs.Rename(staging, dir); err != nil {
			return fmt.Errorf("fsm: finish interrupted restore: %w", err)
		}
	case !exists(dir) && exists(old):
		// The staged set is gone or partial: put the old state back.
		if err := fs.Rename(old, dir); err != nil {
			return fmt.Errorf("fsm: roll back interrupted restore: %w", err)
		}
	}
	if err := fs.RemoveAll(staging); err != nil {
		return err
	}
	if err := fs.RemoveAll(old); err != nil {
		return err
	}
	return durable.SyncDir(fs, fs.PathDir(dir))
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Errorf("fsm: encode %T: %w", m, err))
	}
	return b
}
