package atrest

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft-wal/types"
)

// fillChunk is the size of each write that fills a new segment.
const fillChunk = 1 << 20

// WALVFS is a raft-wal file system that encrypts every segment file as FS
// does for Pebble.
//
// raft-wal finds the end of a segment's written frames by reading zeros from
// its preallocated space. Zeros on disk would decrypt to keystream, so Create
// fills the whole segment with encrypted zeros and syncs it before returning:
// reading an unwritten part then yields zeros, as raft-wal expects, even
// after a crash. That costs one extra write of each segment, once, when
// raft-wal creates it.
type WALVFS struct {
	inner types.VFS
	keys  *Keyring
}

var _ types.VFS = (*WALVFS)(nil)

// NewWALVFS returns inner with every segment encrypted under keys.
func NewWALVFS(inner types.VFS, keys *Keyring) *WALVFS { return &WALVFS{inner: inner, keys: keys} }

func (v *WALVFS) ListDir(dir string) ([]string, error) { return v.inner.ListDir(dir) }
func (v *WALVFS) Delete(dir, name string) error        { return v.inner.Delete(dir, name) }

// Create creates a segment of size plaintext bytes, filled with encrypted
// zeros and synced.
func (v *WALVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	path := filepath.Join(dir, name)
	f, err := v.inner.Create(dir, name, size+HeaderSize)
	if err != nil {
		return nil, err
	}
	c, err := v.keys.writeHeader(f, path)
	if err == nil {
		err = fill(c, f, int64(size))
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &walFile{WritableFile: f, c: c}, nil
}

// fill writes size encrypted zeros from plaintext offset 0.
func fill(c *cryptor, f types.WritableFile, size int64) error {
	zeros := make([]byte, min(size, fillChunk))
	for off := int64(0); off < size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-off)
		if _, err := c.writeAt(f, zeros[:n], off); err != nil {
			return err
		}
	}
	return nil
}

func (v *WALVFS) OpenReader(dir, name string) (types.ReadableFile, error) {
	path := filepath.Join(dir, name)
	f, err := v.inner.OpenReader(dir, name)
	if err != nil {
		return nil, err
	}
	c, err := v.open(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &walReader{ReadableFile: f, c: c}, nil
}

func (v *WALVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	path := filepath.Join(dir, name)
	f, err := v.inner.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	c, empty, err := v.keys.readHeader(f, path)
	if err == nil && empty {
		c, err = v.refill(f, path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &walFile{WritableFile: f, c: c}, nil
}

// refill gives a segment whose header never became durable (a crash inside
// Create) a fresh header and encrypted zeros: it holds no frame, since Create
// syncs before raft-wal writes one.
func (v *WALVFS) refill(f types.WritableFile, path string) (*cryptor, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	c, err := v.keys.writeHeader(f, path)
	if err == nil {
		err = fill(c, f, max(fi.Size()-HeaderSize, 0))
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return c, nil
}

// open reads a segment's header for reading. raft-wal reads only segments it
// wrote frames to, whose header Create synced first, so one without a header
// is refused.
func (v *WALVFS) open(f types.ReadableFile, path string) (*cryptor, error) {
	c, empty, err := v.keys.readHeader(f, path)
	if err == nil && empty {
		err = fmt.Errorf("open %s: %w: no header", path, errBadHeader)
	}
	return c, err
}

type walFile struct {
	types.WritableFile
	c *cryptor
}

func (f *walFile) ReadAt(p []byte, off int64) (int, error) { return f.c.readAt(f.WritableFile, p, off) }
func (f *walFile) WriteAt(p []byte, off int64) (int, error) {
	return f.c.writeAt(f.WritableFile, p, off)
}

type walReader struct {
	types.ReadableFile
	c *cryptor
}

func (f *walReader) ReadAt(p []byte, off int64) (int, error) {
	return f.c.readAt(f.ReadableFile, p, off)
}
