package fsm

import (
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Disk follows data: Pebble preallocates each WAL file in blocks of 110 %
// of the memtable size (70 MiB at DefaultMemTableSize), from its second
// write on, so that appends into the file need not allocate blocks and an
// fdatasync has less metadata to write. With one database per namespace
// that made every namespace, even an empty one, cost about 72 MiB of disk
// per node (and more after reopening, since Pebble keeps old WAL files to
// recycle them).
//
// walPreallocFS keeps the point of preallocation at a cost that follows
// the data: Pebble's request is ignored, and the WAL file is instead
// preallocated in steps just ahead of its write offset. A step is a quarter
// of what is allocated so far, at least minWALStep and at most maxWALStep,
// so an idle namespace's WAL holds 64 KiB beyond its data and a busy one
// allocates 4 MiB at a time (about 50 fallocate calls over a 64 MiB WAL).
type walPreallocFS struct{ vfs.FS }

const (
	minWALStep = 64 << 10
	maxWALStep = 4 << 20
)

// isWAL reports whether name is one of Pebble's write-ahead logs
// (NNNNNN.log).
func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (f walPreallocFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, category)
	if err != nil || !isWAL(name) {
		return file, err
	}
	return &walFile{File: file}, nil
}

// ReuseForWrite reuses a recycled WAL: its blocks up to its old size are
// allocated (written) already.
func (f walPreallocFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, category)
	if err != nil || !isWAL(newname) {
		return file, err
	}
	wf := &walFile{File: file}
	if st, err := file.Stat(); err == nil {
		wf.alloc = st.Size()
	}
	return wf, nil
}

// Unwrap returns the file system underneath (vfs.Root uses it).
func (f walPreallocFS) Unwrap() vfs.FS { return f.FS }

// walFile is a WAL file preallocated in steps ahead of its writes. Pebble
// writes a WAL sequentially from one goroutine.
type walFile struct {
	vfs.File
	off   int64 // where the next Write lands
	alloc int64 // bytes preallocated (or written) from the start
}

// Preallocate ignores Pebble's request (110 % of the memtable at once);
// Write allocates in steps instead.
func (f *walFile) Preallocate(offset, length int64) error { return nil }

func (f *walFile) Write(p []byte) (int, error) {
	if end := f.off + int64(len(p)); end > f.alloc {
		step := min(max(f.alloc/4, minWALStep), maxWALStep)
		to := max(end, f.alloc+step)
		// As Pebble does, a failed preallocation is not an error: the
		// write itself reports a full disk.
		_ = f.File.Preallocate(f.alloc, to-f.alloc)
		f.alloc = to
	}
	n, err := f.File.Write(p)
	f.off += int64(n)
	return n, err
}
