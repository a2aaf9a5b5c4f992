package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// TestInMemoryServer: skald server --in-memory serves reads and writes,
// says loudly that nothing survives, and creates no data directory.
func TestInMemoryServer(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "never")
	p := launch(t, dataDir, func(httpAddr, raftAddr string) []string {
		return []string{"--in-memory", "--http-addr", httpAddr, "--raft-addr", raftAddr, "--log-level", "warn", "--admin-token", testAdmin}
	}, func(p *serverProc) bool { return p.admin(t) })
	env := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	if _, errOut, code := runCLI(t, env, "append", "m-1", "T", `{"k":1}`); code != 0 {
		t.Fatalf("append: exit %d: %s", code, errOut)
	}
	if out, errOut, code := runCLI(t, env, "read", "m-1", "-o", "json"); code != 0 || !strings.Contains(out, `"data":{"k":1}`) {
		t.Fatalf("read: exit %d: %s %s", code, out, errOut)
	}
	if !strings.Contains(p.stderr.String(), "WARNING: --in-memory") || !strings.Contains(p.stderr.String(), "IN-MEMORY NODE") {
		t.Fatalf("no loud in-memory warning: %s", p.stderr)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an in-memory server created %s (%v)", dataDir, err)
	}
	if _, errOut, code := runCLI(t, nil, "server", "--in-memory", "--raft-log-store", "wal"); code != command.ExitUsage || !strings.Contains(errOut, "--raft-log-store does not apply with --in-memory") {
		t.Fatalf("--in-memory with --raft-log-store: exit %d: %s", code, errOut)
	}
}

// TestDevInMemory: skald dev --in-memory starts a cluster whose nodes keep
// no data directory, and says so.
func TestDevInMemory(t *testing.T) {
	t.Parallel()
	base := freeBlock(t, 1)
	dir := t.TempDir()
	out := startDev(t, base, "--nodes", "1", "--in-memory", "--dir", dir)
	if !strings.Contains(out.String(), "IN MEMORY: the nodes write no data to disk") {
		t.Fatalf("dev does not say the cluster is in memory: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "node0")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an in-memory dev node created its data directory (%v)", err)
	}
}
