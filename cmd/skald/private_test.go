package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerFilesPrivate: everything a server writes under its data
// directory, and the backup and export files the CLI writes, are closed
// to other users of the machine (0600 files, 0700 directories), and a
// data directory an older release left 0755 is closed at start.
func TestServerFilesPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startServer(t, dir, "--admin-token", testAdmin)
	env := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	for i := 0; i < 3; i++ {
		if _, errOut, code := runCLI(t, env, "append", "acct-1", "T", fmt.Sprintf(`{"i":%d}`, i)); code != 0 {
			t.Fatal(errOut)
		}
	}
	out := t.TempDir()
	backup, export := filepath.Join(out, "backup.tar"), filepath.Join(out, "export.ndjson")
	if _, errOut, code := runCLI(t, env, "backup", "--out", backup); code != 0 {
		t.Fatalf("backup: %s", errOut)
	}
	if _, errOut, code := runCLI(t, env, "export", "--out", export); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	open := openToOthers(t, dir)
	for _, f := range []string{backup, export} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			open = append(open, fmt.Sprintf("%s %v %v", f, st.Mode(), err))
		}
	}
	if len(open) > 0 {
		t.Fatalf("open to other users:\n%s", strings.Join(open, "\n"))
	}
}

// openToOthers lists dir and what is under it that a user other than the
// owner may read, write or enter.
func openToOthers(t *testing.T, dir string) []string {
	t.Helper()
	var open []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			open = append(open, fmt.Sprintf("%s %04o", path, perm))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return open
}
