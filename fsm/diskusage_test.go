package fsm

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
)

// TestNamespaceDiskFollowsData: a namespace costs disk for what it holds,
// not for Pebble's WAL preallocation (110 % of the memtable size per WAL
// file, about 70 MiB at the default 64 MiB memtable). An empty namespace
// and one holding a few messages each take under 1 MiB (du of the
// directory) while open and written to, once closed, and after the store
// reopened them a few times (each reopen starts a new WAL and recycles or
// removes the old one).
func TestNamespaceDiskFollowsData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Dir: filepath.Join(dir, "fsm")}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, name := range []string{"empty", "few"} {
			info, _ := s.Namespace(name)
			nsDir := filepath.Join(dir, "fsm", "ns", dirName(info.ID))
			if du := diskUsage(t, nsDir); du >= 1<<20 {
				t.Errorf("%s: namespace %q takes %d KiB of disk, want under 1024 KiB", when, name, du>>10)
			} else {
				t.Logf("%s: namespace %q takes %d KiB", when, name, du>>10)
			}
		}
	}
	f := newFeeder(t, s)
	f.must(createNS("empty"))
	f.must(createNS("few"))
	write := func() {
		t.Helper()
		for i := 0; i < 3; i++ {
			f.must(appendCmd("few", "s-1", newMsg("T", `{"n":1}`)))
			if _, err := s.SyncFloor(); err != nil { // writes to every open WAL
				t.Fatal(err)
			}
		}
	}
	write()
	check("open")
	for round := 0; round < 3; round++ {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		check("closed")
		if s, err = Open(opts); err != nil {
			t.Fatal(err)
		}
		f = newFeeder(t, s)
		v, err := s.View("empty") // opens it again
		if err != nil {
			t.Fatal(err)
		}
		write()
		v.Close()
		check("reopened")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// diskUsage is du(1) of dir: the blocks its files hold, preallocated ones
// included.
func diskUsage(t testing.TB, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			return err
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}
