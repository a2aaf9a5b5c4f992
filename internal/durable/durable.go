// Package durable writes files and directories so that they survive a
// crash or power loss: data is fsynced before it is renamed into place, and
// a directory is fsynced after an entry in it is created, renamed or
// removed.
//
// It owns only that mechanism. It must never decide what is written or
// when; it imports nothing of Skald's, so every layer (fsm at the bottom)
// may use it.
package durable

import (
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// SyncDir fsyncs directory dir, making the creation, rename or removal of
// its entries durable.
func SyncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFile creates (or truncates) path, writes data, fsyncs the file and
// then its directory. A crash part way leaves a partial file: use
// ReplaceFile where readers must see the old content or the new.
func WriteFile(fs vfs.FS, path string, data []byte) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return SyncDir(fs, fs.PathDir(path))
}

// PartialSuffix names the file ReplaceFile writes before renaming it.
const PartialSuffix = ".partial"

// ReplaceFile gives path the content write produces, atomically: write
// fills path+PartialSuffix, which is fsynced, renamed over path and made
// durable by fsyncing the directory. When write or any step fails, path is
// unchanged and the partial file is removed.
func ReplaceFile(fs vfs.FS, path string, write func(w io.Writer) error) (err error) {
	partial := path + PartialSuffix
	f, err := fs.Create(partial, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = fs.Remove(partial) // best effort: the error that matters is err
		}
	}()
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := fs.Rename(partial, path); err != nil {
		return err
	}
	return SyncDir(fs, fs.PathDir(path))
}

// MkdirAll creates dir and any missing parents, fsyncing each parent whose
// entries changed, so the new directories survive a power loss.
func MkdirAll(fs vfs.FS, dir string) error {
	if _, err := fs.Stat(dir); err == nil {
		return nil
	}
	parent := fs.PathDir(dir)
	if parent != dir {
		if err := MkdirAll(fs, parent); err != nil {
			return err
		}
	}
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return SyncDir(fs, parent)
}
