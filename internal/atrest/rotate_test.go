package atrest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestRotateKeyring rotates a directory with files on disk from one store key
// to another: the old files stay readable, new files use a new data key, the
// old store key no longer opens the keys file, and the status counts the
// files under each data key.
func TestRotateKeyring(t *testing.T) {
	k1, dir, oldKey := newKeyring(t)
	fs1 := NewFS(vfs.Default, k1)
	oldFile, newFile := filepath.Join(dir, "old"), filepath.Join(dir, "new")
	writeFile(t, fs1, oldFile, []byte("written under the first key"))

	newKey := newKey(t)
	if _, err := OpenKeyring(dir, newKey, "new.key"); err == nil || !strings.Contains(err.Error(), "new.key") {
		t.Fatalf("the new key opened the keys file before the rotation: %v", err)
	}
	k2, rot, err := RotateKeyring(dir, newKey, "new.key", oldKey, "old.key")
	if err != nil {
		t.Fatal(err)
	}
	if !rot.Rotated || rot.Previous != 1 || rot.Current != 2 || k2.Current() != 2 {
		t.Fatalf("rotation %+v, current %d; want 1 -> 2", rot, k2.Current())
	}
	fs2 := NewFS(vfs.Default, k2)
	if got := readRaw(t, fs2, oldFile); string(got) != "written under the first key" {
		t.Fatalf("the old file after the rotation reads %q", got)
	}
	writeFile(t, fs2, newFile, []byte("written under the second key"))
	raw, err := os.ReadFile(newFile)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := parseHeader(raw); err != nil || h.keyID != 2 {
		t.Fatalf("the new file's header: %+v, %v; want data key 2", h, err)
	}

	// The old store key is no longer needed, and no longer works.
	if _, err := OpenKeyring(dir, oldKey, "old.key"); err == nil || !strings.Contains(err.Error(), "old.key") {
		t.Fatalf("the old key still opens the keys file after the rotation: %v", err)
	}
	k3, err := OpenKeyring(dir, newKey, "new.key")
	if err != nil {
		t.Fatal(err)
	}
	if got := readRaw(t, NewFS(vfs.Default, k3), oldFile); string(got) != "written under the first key" {
		t.Fatalf("the old file with the new key alone reads %q", got)
	}
	keys, err := os.ReadFile(filepath.Join(dir, KeysFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range [][]byte{oldKey, newKey} {
		if bytes.Contains(keys, key) {
			t.Fatal("the keys file holds a store key")
		}
	}

	// Rotating again with the same pair changes nothing.
	before := keys
	if _, rot, err := RotateKeyring(dir, newKey, "new.key", oldKey, "old.key"); err != nil || rot.Rotated {
		t.Fatalf("a second rotation: %+v, %v; want nothing done", rot, err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, KeysFile)); !bytes.Equal(after, before) {
		t.Fatal("a second rotation rewrote the keys file")
	}

	st, err := ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	sk, _ := NewStoreKey(newKey)
	if len(st.Keys) != 2 || st.Keys[0].Files != 1 || st.Keys[1].Files != 1 || st.OlderKeyFiles() != 1 ||
		st.Keys[0].Example != oldFile || len(st.StoreKeys()) != 1 || st.StoreKeys()[0] != sk.Fingerprint() {
		t.Fatalf("status %+v; want one file per data key, both wrapped by %s", st, sk.Fingerprint())
	}
	if st.Plain != 1 { // the keys file
		t.Fatalf("status counts %d plain files, want 1 (the keys file)", st.Plain)
	}
	// Once the old file is rewritten under the current key, nothing needs
	// the earlier data key.
	writeFile(t, fs2, oldFile, []byte("rewritten"))
	if st, err := ReadStatus(dir); err != nil || st.OlderKeyFiles() != 0 {
		t.Fatalf("after rewriting: %d files under older keys (%v); want 0", st.OlderKeyFiles(), err)
	}
}

// TestRotateRefusals: keys that open nothing are refused naming both files,
// and change nothing.
func TestRotateRefusals(t *testing.T) {
	_, dir, oldKey := newKeyring(t)
	path := filepath.Join(dir, KeysFile)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		new, old []byte
	}{
		{"wrong old key", newKey(t), newKey(t)},
		{"short new key", []byte("short"), oldKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := RotateKeyring(dir, tc.new, "new.key", tc.old, "old.key")
			if err == nil {
				t.Fatal("the rotation succeeded")
			}
			if !strings.Contains(err.Error(), "new.key") {
				t.Fatalf("%v; want it to name new.key", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
				t.Fatal("a refused rotation changed the keys file")
			}
		})
	}
	if _, _, err := RotateKeyring(t.TempDir(), newKey(t), "new.key", oldKey, "old.key"); err == nil {
		t.Fatal("a rotation without a keys file succeeded")
	}
}
