package atrest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, StoreKeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func newKeyring(t *testing.T) (*Keyring, string, []byte) {
	t.Helper()
	dir := t.TempDir()
	key := newKey(t)
	k, err := CreateKeyring(dir, key)
	if err != nil {
		t.Fatal(err)
	}
	return k, dir, key
}

func TestReadStoreKey(t *testing.T) {
	key := newKey(t)
	for _, tc := range []struct {
		name    string
		content []byte
		ok      bool
	}{
		{"raw", key, true},
		{"hex", []byte(hex.EncodeToString(key)), true},
		{"hex with newline", []byte(hex.EncodeToString(key) + "\n"), true},
		{"short raw", key[:31], false},
		{"short hex", []byte(hex.EncodeToString(key)[:62]), false},
		{"not hex", []byte(strings.Repeat("zz", 32)), false},
		{"empty", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.key")
			if err := os.WriteFile(path, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadStoreKey(path)
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), path) {
					t.Fatalf("ReadStoreKey = %v, want an error naming %s", err, path)
				}
				return
			}
			if err != nil || !bytes.Equal(got, key) {
				t.Fatalf("ReadStoreKey = %x, %v; want %x", got, err, key)
			}
		})
	}
	const missing = "/nonexistent/store.key"
	if _, err := ReadStoreKey(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing key file: %v, want an error naming it", err)
	}
}

func TestKeyringReopen(t *testing.T) {
	k, dir, key := newKeyring(t)
	k2, err := OpenKeyring(dir, key, "store.key")
	if err != nil {
		t.Fatal(err)
	}
	if k2.current != k.current {
		t.Fatalf("reopened current key %d, want %d", k2.current, k.current)
	}
	if _, err := CreateKeyring(dir, key); err == nil {
		t.Fatal("CreateKeyring replaced an existing keys file")
	}
	data, err := os.ReadFile(filepath.Join(dir, KeysFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, key) || bytes.Contains(data, []byte(hex.EncodeToString(key))) {
		t.Fatal("the keys file holds the store key")
	}
}

func TestWrongKeyRefused(t *testing.T) {
	_, dir, _ := newKeyring(t)
	_, err := OpenKeyring(dir, newKey(t), "/etc/skald/wrong.key")
	if err == nil || !strings.Contains(err.Error(), "/etc/skald/wrong.key") {
		t.Fatalf("OpenKeyring with a wrong key = %v, want an error naming the key file", err)
	}
	if _, err := OpenKeyring(t.TempDir(), newKey(t), "k"); err == nil {
		t.Fatal("OpenKeyring without a keys file succeeded")
	}
}

// TestRandomOffsets writes and reads at random offsets and checks the result
// against a plaintext copy, and that no written run shows on the disk below.
func TestRandomOffsets(t *testing.T) {
	k, _, _ := newKeyring(t)
	mem := vfs.NewMem()
	fs := NewFS(mem, k)
	f, err := fs.Create("f", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	rng := mrand.New(mrand.NewPCG(1, 2))
	const size = 1 << 16
	want := make([]byte, size)
	// Holes would read as keystream, not zeros; write every byte once first.
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		off := rng.IntN(size - 1)
		n := 1 + rng.IntN(min(size-off, 3000))
		p := bytes.Repeat([]byte{byte(rng.IntN(256))}, n)
		copy(want[off:], p)
		if _, err := f.WriteAt(p, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 {
		off := rng.IntN(size)
		got := make([]byte, 1+rng.IntN(size-off))
		if _, err := f.ReadAt(got, int64(off)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[off:off+len(got)]) {
			t.Fatalf("ReadAt(%d, %d) differs from what was written", off, len(got))
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := fs.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("sequential read after reopen: %d bytes, %v; want the %d written", len(got), err, size)
	}
	if fi, err := fs.Stat("f"); err != nil || fi.Size() != size {
		t.Fatalf("Stat = %v, %v; want size %d", fi, err, size)
	}
	raw := readRaw(t, mem, "f")
	if len(raw) != size+HeaderSize {
		t.Fatalf("raw size %d, want %d", len(raw), size+HeaderSize)
	}
	if bytes.Equal(raw[HeaderSize:], want) {
		t.Fatal("the file below holds the plaintext")
	}
}

func TestSequentialWriteRead(t *testing.T) {
	k, _, _ := newKeyring(t)
	fs := NewFS(vfs.NewMem(), k)
	f, err := fs.Create("f", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 50 {
		p := bytes.Repeat([]byte{byte(i)}, 1+i*7)
		want = append(want, p...)
		if _, err := f.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	r, err := fs.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 13)
	for {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("sequential read differs from the sequential writes")
	}
}

func readRaw(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, fs vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFreshIVPerFile(t *testing.T) {
	k, _, _ := newKeyring(t)
	mem := vfs.NewMem()
	fs := NewFS(mem, k)
	same := bytes.Repeat([]byte("same plaintext "), 10)
	writeFile(t, fs, "a", same)
	writeFile(t, fs, "b", same)
	a, b := readRaw(t, mem, "a"), readRaw(t, mem, "b")
	if bytes.Equal(a[16:HeaderSize], b[16:HeaderSize]) {
		t.Fatal("two files got the same IV")
	}
	if bytes.Equal(a[HeaderSize:], b[HeaderSize:]) {
		t.Fatal("the same plaintext in two files gave the same ciphertext")
	}
	// Recreating a file draws a new IV too.
	writeFile(t, fs, "a", same)
	if bytes.Equal(readRaw(t, mem, "a")[16:HeaderSize], a[16:HeaderSize]) {
		t.Fatal("a recreated file kept its IV")
	}
	f, err := fs.ReuseForWrite("b", "c", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if bytes.Equal(readRaw(t, mem, "c")[16:HeaderSize], b[16:HeaderSize]) {
		t.Fatal("a reused file kept its IV")
	}
}

func TestBadHeaderRefused(t *testing.T) {
	k, _, _ := newKeyring(t)
	mem := vfs.NewMem()
	fs := NewFS(mem, k)
	writeFile(t, fs, "good", []byte("payload"))
	good := readRaw(t, mem, "good")
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"truncated header", good[:10]},
		{"plaintext file", []byte("an unencrypted file written before encryption was on")},
		{"garbled magic", append([]byte("XXXX"), good[4:]...)},
		{"future version", append(append(bytes.Clone(good[:4]), 9), good[5:]...)},
		{"unknown data key", append(append(bytes.Clone(good[:8]), 0, 0, 0, 7), good[12:]...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			writeFile(t, mem, name, tc.raw)
			_, err := fs.Open(name)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("Open = %v, want an error naming %s", err, name)
			}
			if _, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified); err == nil {
				t.Fatal("OpenReadWrite accepted the file")
			}
		})
	}
	// Opening the good file with another keyring (another store) fails too.
	other, _, _ := newKeyring(t)
	other.blocks[1] = nil
	delete(other.blocks, 1)
	other.blocks[2], other.current = k.blocks[1], 2
	if _, err := NewFS(mem, other).Open("good"); err == nil || !strings.Contains(err.Error(), "good") {
		t.Fatalf("Open under a keyring without the file's key = %v, want an error naming the file", err)
	}
}
