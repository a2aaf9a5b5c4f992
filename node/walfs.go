package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"

	"github.com/skalddb/skald/internal/durable"
)

// walFS is raft-wal's file system with two changes.
//
// A segment's Sync is fdatasync(2), not fsync(2), as etcd's WAL does.
// raft-wal preallocates every segment to its full size when it creates it,
// so an append changes only data and the timestamps, and fdatasync still
// writes every piece of metadata a later read needs (the size and the
// extents it allocated). Skipping the inode's timestamps costs the kernel a
// fifth less CPU per sync on ext4 here (bench/README.md).
//
// A failed Create leaves nothing behind (issue 28, finding 8). raft-wal
// records a new segment (and its ID) in its meta store before it creates
// the file, and its Create leaves the file on disk when preallocating it
// fails (a full disk). The WAL's in-memory state then keeps the old segment
// ID, so every retry of the same tail truncation creates the same file
// name and fails with "file exists", even once space is back: the node
// wedges until someone removes the file by hand. walFS removes the file of
// a failed Create, and before creating segment ID removes any file that
// carries that ID. That is safe because such a file never holds a log
// entry: raft-wal writes entries only through the writer of a successful
// Create (or RecoverTail of the tail its meta store names, at startup), and
// after a successful Create of ID its next ID, in memory and in the meta
// store, is above ID, so no later Create asks for ID again. A file named
// with ID at Create time is therefore left by a Create of ID that failed.
//
// Every Sync of a segment is timed by synced (when set).
type walFS struct {
	types.VFS
	synced func(time.Duration)
}

// newWALFS is raft-wal's operating-system file system, wrapped; synced,
// when set, is told the time of each segment Sync.
func newWALFS(synced func(time.Duration)) walFS { return walFS{walfs.New(), synced} }

// Create creates and preallocates a segment as raft-wal does, after
// removing what failed Creates of the same segment ID left (see walFS),
// and removes the file again when that fails. Its first Sync also syncs
// dir, so the new file's entry survives a crash before the first entry
// written to it is acknowledged.
func (w walFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	if err := removeLeftoverSegments(dir, name); err != nil {
		return nil, err
	}
	f, err := w.VFS.Create(dir, name, size)
	if err != nil {
		if rerr := os.Remove(filepath.Join(dir, name)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("node: remove the segment file a failed create left: %w", rerr))
		}
		return nil, err
	}
	wf, ok := f.(*walfs.File)
	if !ok {
		return f, nil // not raft-wal's file: keep its own Sync
	}
	d := &dataSyncFile{WritableFile: wf, f: &wf.File, dir: dir, synced: w.synced}
	d.newFile.Store(true)
	return d, nil
}

// removeLeftoverSegments removes the files in dir named with the segment
// ID of name (raft-wal's "<base index>-<id>.wal"), whatever their base
// index: see walFS for why only a failed Create leaves such a file.
func removeLeftoverSegments(dir, name string) error {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || !strings.HasSuffix(name, ".wal") {
		return nil
	}
	idSuffix := name[i:] // "-<16 hex digits>.wal"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("node: list raft log segments: %w", err)
	}
	removed := false
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), idSuffix) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("node: remove segment file %s left by a failed create: %w", e.Name(), err)
		}
		removed = true
	}
	if removed {
		return durable.SyncDir(vfs.Default, dir)
	}
	return nil
}

// OpenWriter reopens an existing segment (the tail after a restart).
func (w walFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := w.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	of, ok := f.(*os.File)
	if !ok {
		return f, nil
	}
	return &dataSyncFile{WritableFile: f, f: of, synced: w.synced}, nil
}

// dataSyncFile is a segment file whose Sync is fdatasync; see walFS.
type dataSyncFile struct {
	types.WritableFile
	f       *os.File
	dir     string
	newFile atomic.Bool // dir still to be synced
	synced  func(time.Duration)
}

func (d *dataSyncFile) Sync() error {
	start := time.Now()
	if err := fdatasync(d.f); err != nil {
		return err
	}
	if d.synced != nil {
		d.synced(time.Since(start))
	}
	if d.newFile.Swap(false) {
		return durable.SyncDir(vfs.Default, d.dir)
	}
	return nil
}
