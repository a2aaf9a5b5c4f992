package atrest

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/segment"
)

const secret = "PLAINTEXT-CANARY-7f3a"

// assertNoPlaintext fails when any file under dir holds s.
func assertNoPlaintext(t *testing.T, dir, s string) (files int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s holds the plaintext %q", path, s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestPebbleOnFS(t *testing.T) {
	for _, encrypted := range []bool{false, true} {
		t.Run(fmt.Sprintf("encrypted=%v", encrypted), func(t *testing.T) {
			k, _, _ := newKeyring(t)
			var fs vfs.FS = vfs.Default
			if encrypted {
				fs = NewFS(vfs.Default, k)
			}
			dir := t.TempDir()
			open := func() *pebble.DB {
				db, err := pebble.Open(dir, &pebble.Options{FS: fs})
				if err != nil {
					t.Fatal(err)
				}
				return db
			}
			db := open()
			for i := range 1000 {
				v := fmt.Sprintf("%s-%d", secret, i)
				if err := db.Set([]byte(fmt.Sprintf("k%04d", i)), []byte(v), pebble.Sync); err != nil {
					t.Fatal(err)
				}
				if i == 500 {
					if err := db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := db.Compact(t.Context(), []byte("k"), []byte("l"), true); err != nil {
				t.Fatal(err)
			}
			db.Close()
			db = open()
			defer db.Close()
			v, closer, err := db.Get([]byte("k0999"))
			if err != nil || string(v) != secret+"-999" {
				t.Fatalf("Get after reopen = %q, %v", v, err)
			}
			closer.Close()
			if !encrypted {
				// The check can fail: without encryption the canary is on disk.
				if found := grepDir(t, dir, secret); !found {
					t.Fatal("the unencrypted run shows no plaintext: the scan cannot fail")
				}
				return
			}
			assertNoPlaintext(t, dir, secret)
		})
	}
}

func grepDir(t *testing.T, dir, s string) bool {
	t.Helper()
	found := false
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(s)) {
				found = true
			}
		}
		return nil
	})
	return found
}

func TestRaftWALOnWALVFS(t *testing.T) {
	k, _, _ := newKeyring(t)
	dir := t.TempDir()
	open := func() *raftwal.WAL {
		w, err := raftwal.Open(dir, raftwal.WithSegmentSize(64<<10),
			raftwal.WithSegmentFiler(segment.NewFiler(dir, NewWALVFS(walfs.New(), k))))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open()
	const n = 300 // several 64 KiB segments
	for i := uint64(1); i <= n; i++ {
		data := []byte(strings.Repeat(fmt.Sprintf("%s-%d ", secret, i), 20))
		if err := w.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: data}}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	w = open()
	for _, i := range []uint64{1, 150, n} {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil || !strings.HasPrefix(string(l.Data), fmt.Sprintf("%s-%d ", secret, i)) {
			t.Fatalf("GetLog(%d) after reopen = %q, %v", i, l.Data, err)
		}
	}
	if err := w.StoreLogs([]*raft.Log{{Index: n + 1, Term: 1, Data: []byte("after reopen")}}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if files := assertNoPlaintext(t, dir, secret); files < 3 {
		t.Fatalf("%d files under %s, want several segments", files, dir)
	}
}

// TestWALVFSHeaders: a segment whose header never became durable (all
// zeros: a crash inside Create) is refilled on OpenWriter and reads as zeros,
// as raft-wal expects of unwritten space; a garbled header is refused naming
// the file.
func TestWALVFSHeaders(t *testing.T) {
	k, _, _ := newKeyring(t)
	dir := t.TempDir()
	v := NewWALVFS(walfs.New(), k)
	if err := os.WriteFile(filepath.Join(dir, "torn.wal"), make([]byte, HeaderSize+4096), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := v.OpenWriter(dir, "torn.wal")
	if err != nil {
		t.Fatalf("OpenWriter of a segment with a torn header: %v", err)
	}
	got := make([]byte, 4096)
	if _, err := w.ReadAt(got, 0); err != nil || !bytes.Equal(got, make([]byte, 4096)) {
		t.Fatalf("a refilled segment reads %v (%v), want zeros", got[:16], err)
	}
	w.Close()
	raw, err := os.ReadFile(filepath.Join(dir, "torn.wal"))
	if err != nil || bytes.Equal(raw[HeaderSize:], make([]byte, 4096)) {
		t.Fatalf("the refilled segment holds zeros on disk (%v): it was not encrypted", err)
	}
	raw[0] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, "bad.wal"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, open := range []func() error{
		func() error { _, err := v.OpenReader(dir, "bad.wal"); return err },
		func() error { _, err := v.OpenWriter(dir, "bad.wal"); return err },
	} {
		if err := open(); err == nil || !strings.Contains(err.Error(), "bad.wal") {
			t.Fatalf("opening a segment with a garbled header = %v, want an error naming it", err)
		}
	}
}
