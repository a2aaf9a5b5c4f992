package fsm

import (
	"errors"
	"io"
	"os"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// waitFS is the file system of one open Pebble database: once the database
// is open (armed), an operation that meets a resource error waits for the
// resource and retries instead of returning the error. Pebble treats a
// failed WAL or MANIFEST write, or a WAL it cannot create, as fatal (it
// cannot take back a record half written), so without this a full disk or
// a process out of file descriptors would stop the node on whatever entry
// it was applying.
//
// What waits, and on what:
//   - writes (Write, WriteAt): a full device or quota (ENOSPC, EDQUOT); the
//     bytes written before the error stay, the rest is written again, at
//     the offset the error left, so the file ends as one successful write
//     would have left it;
//   - creating, reusing, linking and renaming files, creating directories:
//     a full device or quota, or no free file descriptor (EMFILE, ENFILE);
//   - opening a file for writing, a directory (to sync it) or the lock
//     file: no free file descriptor.
//
// Sync is never retried: after a failed fsync the kernel may have dropped
// the dirty pages, and a second fsync would report success for data that
// never reached the disk. Opening files for reading is not retried either:
// a read that cannot open an sstable returns its error to the caller
// (apply retries the whole call, see ApplyBatch; a client read fails).
//
// While the database opens the wrapper is not armed: Pebble's Open returns
// its resource errors, and apply retries the open without holding the
// store's locks.
type waitFS struct {
	vfs.FS
	w     *waiter
	armed atomic.Bool
}

func (f *waitFS) retry(waitable func(error) bool, op func() error) error {
	if !f.armed.Load() {
		return op()
	}
	return f.w.retry(waitable, op)
}

func (f *waitFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &waitFile{File: file, fs: f}, nil
}

func (f *waitFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	var file vfs.File
	err := f.retry(IsResourceError, func() (err error) {
		file, err = f.FS.Create(name, category)
		return err
	})
	return f.wrap(file, err)
}

// ReuseForWrite renames oldname to newname and opens it for writing. When
// the rename went through and the open failed, a retry opens newname.
func (f *waitFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	var file vfs.File
	renamed := false
	err := f.retry(IsResourceError, func() (err error) {
		if renamed {
			file, err = f.FS.OpenReadWrite(newname, category)
			return err
		}
		if file, err = f.FS.ReuseForWrite(oldname, newname, category); err != nil {
			_, oldErr := f.FS.Stat(oldname)
			_, newErr := f.FS.Stat(newname)
			renamed = errors.Is(oldErr, os.ErrNotExist) && newErr == nil
		}
		return err
	})
	return f.wrap(file, err)
}

func (f *waitFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	var file vfs.File
	err := f.retry(isDescriptorError, func() (err error) {
		file, err = f.FS.OpenReadWrite(name, category, opts...)
		return err
	})
	return f.wrap(file, err)
}

func (f *waitFS) OpenDir(name string) (vfs.File, error) {
	var file vfs.File
	err := f.retry(isDescriptorError, func() (err error) {
		file, err = f.FS.OpenDir(name)
		return err
	})
	return file, err
}

func (f *waitFS) Link(oldname, newname string) error {
	return f.retry(IsResourceError, func() error { return f.FS.Link(oldname, newname) })
}

func (f *waitFS) Rename(oldname, newname string) error {
	return f.retry(IsResourceError, func() error { return f.FS.Rename(oldname, newname) })
}

func (f *waitFS) MkdirAll(dir string, perm os.FileMode) error {
	return f.retry(IsResourceError, func() error { return f.FS.MkdirAll(dir, perm) })
}

func (f *waitFS) Lock(name string) (io.Closer, error) {
	var c io.Closer
	err := f.retry(isDescriptorError, func() (err error) {
		c, err = f.FS.Lock(name)
		return err
	})
	return c, err
}

// Unwrap returns the file system underneath (vfs.Root uses it).
func (f *waitFS) Unwrap() vfs.FS { return f.FS }

// waitFile is a file of a waitFS: its writes wait out a full device.
type waitFile struct {
	vfs.File
	fs *waitFS
}

func (f *waitFile) Write(p []byte) (int, error) {
	var n int
	err := f.fs.retry(isSpaceError, func() error {
		m, err := f.File.Write(p[n:])
		n += m
		return err
	})
	return n, err
}

func (f *waitFile) WriteAt(p []byte, off int64) (int, error) {
	var n int
	err := f.fs.retry(isSpaceError, func() error {
		m, err := f.File.WriteAt(p[n:], off+int64(n))
		n += m
		return err
	})
	return n, err
}
