package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// simulatedFullDisk is raft-wal's file system on a disk that is full while
// full is set: Create makes the file and then fails to preallocate it with
// ENOSPC, leaving the file behind, exactly as raft-wal's own Create does
// (fs.FS.Create: open O_EXCL, then fileutil.Preallocate fails).
type simulatedFullDisk struct {
	types.VFS
	full atomic.Bool
}

func (d *simulatedFullDisk) Create(dir, name string, size uint64) (types.WritableFile, error) {
	if !d.full.Load() {
		return d.VFS.Create(dir, name, size)
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	f.Close()
	return nil, &os.PathError{Op: "fallocate", Path: filepath.Join(dir, name), Err: syscall.ENOSPC}
}

// TestWALTruncationRecoversFromFullDisk is finding 8 of issue 28: a tail
// truncation (a follower dropping entries a new leader does not have) ran
// into a full disk while creating the next segment; raft-wal had recorded
// the segment, left its file behind, and every retry failed with "file
// exists", even after space came back. Now the retry succeeds once there
// is space, the log takes new entries at the truncated index, and they are
// there after a reopen. Both on a simulated full disk and, as root, on a
// real tmpfs filled up.
func TestWALTruncationRecoversFromFullDisk(t *testing.T) {
	t.Parallel()
	const segmentSize = 8 << 20
	cases := []struct {
		name string
		// disk returns the WAL's directory and its file system, and makes
		// the disk full or frees it.
		disk func(t *testing.T) (dir string, vfs types.VFS, full func(bool))
	}{
		{"simulated", func(t *testing.T) (string, types.VFS, func(bool)) {
			d := &simulatedFullDisk{VFS: walfs.New()}
			return t.TempDir(), d, d.full.Store
		}},
		{"tmpfs", func(t *testing.T) (string, types.VFS, func(bool)) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to mount a tmpfs")
			}
			mnt := t.TempDir()
			if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64m"); err != nil {
				t.Skipf("cannot mount a tmpfs: %v", err)
			}
			t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
			dir := filepath.Join(mnt, "wal")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			filler := filepath.Join(mnt, "filler")
			return dir, walfs.New(), func(full bool) {
				if !full {
					if err := os.Remove(filler); err != nil {
						t.Fatal(err)
					}
					return
				}
				// Leave room for raft-wal's meta store, not for a segment.
				free, err := freeDiskBytes(mnt)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filler, make([]byte, free-segmentSize/4), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, inner, full := tc.disk(t)
			open := func() *raftwal.WAL {
				t.Helper()
				w, err := raftwal.Open(dir, raftwal.WithSegmentSize(segmentSize),
					raftwal.WithSegmentFiler(segment.NewFiler(dir, walFS{VFS: inner})))
				if err != nil {
					t.Fatalf("open the WAL: %v", err)
				}
				return w
			}
			w := open()
			store := func(term uint64, from, to uint64) {
				t.Helper()
				var logs []*raft.Log
				for i := from; i <= to; i++ {
					logs = append(logs, &raft.Log{Index: i, Term: term, Data: []byte(fmt.Sprintf("t%d-%d", term, i))})
				}
				if err := w.StoreLogs(logs); err != nil {
					t.Fatalf("store %d..%d: %v", from, to, err)
				}
			}
			store(1, 1, 10)

			full(true)
			if err := w.DeleteRange(6, 10); err == nil || !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("truncating on a full disk: %v, want a no-space error", err)
			}
			full(false)
			if err := w.DeleteRange(6, 10); err != nil {
				t.Fatalf("truncating again once space is back: %v", err)
			}
			store(2, 6, 7)
			check := func(when string) {
				t.Helper()
				last, err := w.LastIndex()
				if err != nil || last != 7 {
					t.Fatalf("%s: last index %d %v, want 7", when, last, err)
				}
				for i, want := range map[uint64]string{5: "t1-5", 6: "t2-6", 7: "t2-7"} {
					var l raft.Log
					if err := w.GetLog(i, &l); err != nil || string(l.Data) != want {
						t.Fatalf("%s: entry %d = %q %v, want %q", when, i, l.Data, err, want)
					}
				}
			}
			check("after the truncation")
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			w = open()
			defer w.Close()
			check("after reopening")
		})
	}
}
