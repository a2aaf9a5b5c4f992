package durable

import (
	"errors"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// crash returns what a power loss right now would leave of fs: only what
// was synced (file data and directory entries alike).
func crash(fs *vfs.MemFS) *vfs.MemFS { return fs.CrashClone(vfs.CrashCloneCfg{}) }

func readFile(t *testing.T, fs vfs.FS, path string) (string, bool) {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b), true
}

func TestWritesSurviveCrash(t *testing.T) {
	cases := []struct {
		name  string
		write func(fs vfs.FS) error
		path  string
		want  string
	}{
		{"WriteFile in a new directory", func(fs vfs.FS) error {
			if err := MkdirAll(fs, "/a/b/c"); err != nil {
				return err
			}
			return WriteFile(fs, "/a/b/c/f", []byte("one"))
		}, "/a/b/c/f", "one"},
		{"ReplaceFile of a new file", func(fs vfs.FS) error {
			return ReplaceFile(fs, "/f", func(w io.Writer) error {
				_, err := io.WriteString(w, "new")
				return err
			})
		}, "/f", "new"},
		{"ReplaceFile over an old file", func(fs vfs.FS) error {
			if err := WriteFile(fs, "/f", []byte("old")); err != nil {
				return err
			}
			return ReplaceFile(fs, "/f", func(w io.Writer) error {
				_, err := io.WriteString(w, "new")
				return err
			})
		}, "/f", "new"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			if err := tc.write(fs); err != nil {
				t.Fatal(err)
			}
			got, ok := readFile(t, crash(fs), tc.path)
			if !ok || got != tc.want {
				t.Fatalf("after a crash %s holds %q (exists %v), want %q", tc.path, got, ok, tc.want)
			}
		})
	}
}

// TestUnsyncedWriteIsLost shows the crash model has teeth: a file written
// without this package's syncs does not survive.
func TestUnsyncedWriteIsLost(t *testing.T) {
	fs := vfs.NewCrashableMem()
	f, err := fs.Create("/f", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got, ok := readFile(t, crash(fs), "/f"); ok && got != "" {
		t.Fatalf("an unsynced file survived a crash with %q", got)
	}
}

func TestReplaceFileFailureKeepsOldContent(t *testing.T) {
	fs := vfs.NewCrashableMem()
	if err := WriteFile(fs, "/f", []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := ReplaceFile(fs, "/f", func(w io.Writer) error {
		io.WriteString(w, "half")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("ReplaceFile returned %v, want the write's error", err)
	}
	if got, _ := readFile(t, fs, "/f"); got != "old" {
		t.Fatalf("/f holds %q after a failed replace, want %q", got, "old")
	}
	if _, ok := readFile(t, fs, "/f"+PartialSuffix); ok {
		t.Fatal("the partial file was left behind")
	}
}
