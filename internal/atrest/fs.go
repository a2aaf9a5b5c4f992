package atrest

import (
	"errors"
	"io"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is a Pebble file system that encrypts every file's contents on the way
// to the file system underneath and decrypts them on the way back. Names,
// sizes (less the header), directories and locks pass through unchanged.
type FS struct {
	inner vfs.FS
	keys  *Keyring
}

var _ vfs.FS = (*FS)(nil)

// NewFS returns inner with every file encrypted under keys.
func NewFS(inner vfs.FS, keys *Keyring) *FS { return &FS{inner: inner, keys: keys} }

// Create creates (or truncates) name and writes a fresh header.
func (fs *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.inner.Create(name, category)
	if err != nil {
		return nil, err
	}
	c, err := fs.keys.writeHeader(f, name)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &file{File: f, c: c}, nil
}

// Open opens name for reading; a file without a valid header is refused,
// naming it.
func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.inner.Open(name, opts...)
	if err != nil {
		return nil, err
	}
	c, empty, err := fs.keys.readHeader(f, name)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &file{File: f, c: c, empty: empty}, nil
}

// OpenReadWrite opens name for reading and writing; a missing or empty file
// gets a fresh header.
func (fs *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.inner.OpenReadWrite(name, category, opts...)
	if err != nil {
		return nil, err
	}
	c, empty, err := fs.keys.readHeader(f, name)
	if err == nil && empty {
		c, err = fs.keys.writeHeader(f, name)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &file{File: f, c: c}, nil
}

// ReuseForWrite renames oldname to newname and truncates it: a reused file
// gets a fresh IV, and no old ciphertext is left to decrypt under it.
func (fs *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.inner.Rename(oldname, newname); err != nil {
		return nil, err
	}
	return fs.Create(newname, category)
}

// Stat reports name with the size of its plaintext.
func (fs *FS) Stat(name string) (vfs.FileInfo, error) {
	fi, err := fs.inner.Stat(name)
	if err != nil {
		return nil, err
	}
	return plainInfo{fi}, nil
}

func (fs *FS) Link(oldname, newname string) error          { return fs.inner.Link(oldname, newname) }
func (fs *FS) OpenDir(name string) (vfs.File, error)       { return fs.inner.OpenDir(name) }
func (fs *FS) Remove(name string) error                    { return fs.inner.Remove(name) }
func (fs *FS) RemoveAll(name string) error                 { return fs.inner.RemoveAll(name) }
func (fs *FS) Rename(oldname, newname string) error        { return fs.inner.Rename(oldname, newname) }
func (fs *FS) MkdirAll(dir string, perm os.FileMode) error { return fs.inner.MkdirAll(dir, perm) }
func (fs *FS) Lock(name string) (io.Closer, error)         { return fs.inner.Lock(name) }
func (fs *FS) List(dir string) ([]string, error)           { return fs.inner.List(dir) }
func (fs *FS) PathBase(path string) string                 { return fs.inner.PathBase(path) }
func (fs *FS) PathJoin(elem ...string) string              { return fs.inner.PathJoin(elem...) }
func (fs *FS) PathDir(path string) string                  { return fs.inner.PathDir(path) }

func (fs *FS) GetDiskUsage(path string) (vfs.DiskUsage, error) { return fs.inner.GetDiskUsage(path) }

// Unwrap returns nil: nothing may reach the file system underneath around
// the encryption.
func (fs *FS) Unwrap() vfs.FS { return nil }

// plainInfo is a file's FileInfo with the size of its plaintext.
type plainInfo struct{ vfs.FileInfo }

func (i plainInfo) Size() int64 {
	if !i.Mode().IsRegular() {
		return i.FileInfo.Size()
	}
	return max(i.FileInfo.Size()-HeaderSize, 0)
}

// file is one open encrypted file. Offsets are plaintext offsets.
type file struct {
	vfs.File
	c     *cryptor
	empty bool // no header: reads see no bytes

	mu   sync.Mutex // guards rpos, wpos
	rpos int64
	wpos int64
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if f.empty {
		return 0, io.EOF
	}
	return f.c.readAt(f.File, p, off)
}

func (f *file) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.ReadAt(p, f.rpos)
	f.rpos += int64(n)
	if errors.Is(err, io.EOF) && n > 0 {
		err = nil
	}
	return n, err
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if f.empty {
		return 0, errors.New("write to a file opened read-only")
	}
	return f.c.writeAt(f.File, p, off)
}

func (f *file) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.WriteAt(p, f.wpos)
	f.wpos += int64(n)
	return n, err
}

func (f *file) Preallocate(offset, length int64) error {
	return f.File.Preallocate(offset+HeaderSize, length)
}

func (f *file) Stat() (vfs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return plainInfo{fi}, nil
}

func (f *file) SyncTo(length int64) (bool, error) { return f.File.SyncTo(length + HeaderSize) }

func (f *file) Prefetch(offset, length int64) error {
	return f.File.Prefetch(offset+HeaderSize, length)
}

// Fd returns InvalidFd: a caller with the descriptor would see ciphertext
// at offsets off by the header.
func (f *file) Fd() uintptr { return vfs.InvalidFd }
