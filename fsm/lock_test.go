package fsm

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestOpenLockedDirectory: a store opened twice on one directory is
// refused with ErrLocked naming the lock file, not Pebble's bare "lock
// held" text. (Another process gets fcntl's EAGAIN instead; the CLI test
// TestServerDataDirInUse covers that.) Once the first closes, it opens.
func TestOpenLockedDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "fsm")
	first := openTestStore(t, vfs.Default, func(o *Options) { o.Dir = dir })
	_, err := Open(Options{Dir: dir, FS: vfs.Default})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if lock := filepath.Join(dir, "_metadata", "LOCK"); !strings.Contains(err.Error(), lock) {
		t.Fatalf("second open: %q does not name the lock file %s", err, lock)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(Options{Dir: dir, FS: vfs.Default})
	if err != nil {
		t.Fatalf("open after the first store closed: %v", err)
	}
	again.Close()
}
