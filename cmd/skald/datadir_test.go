package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skalddb/skald/internal/testutil"
)

// TestServerDataDirInUse: a second server on a data directory in use
// exits saying another process holds it and which lock file (it used to
// say "fsm: open _metadata: resource temporarily unavailable"), and the
// first keeps serving.
func TestServerDataDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startServer(t, dir, "--admin-token", testAdmin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "server", "--data-dir", dir,
		"--http-addr", testutil.FreeAddr(t), "--raft-addr", testutil.FreeAddr(t), "--log-level", "warn")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the second server kept running: %s", out)
	}
	if err == nil {
		t.Fatalf("the second server exited 0: %s", out)
	}
	lock := filepath.Join(dir, "fsm", "_metadata", "LOCK")
	for _, want := range []string{"another process holds its lock file " + lock, "data directory in use"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("the second server's output lacks %q:\n%s", want, out)
		}
	}
	if _, _, code := runCLI(t, []string{"SKALD_ADDR=" + first.addr, "SKALD_TOKEN=" + testAdmin}, "append", "s-1", "T", `{}`); code != 0 {
		t.Fatalf("the first server stopped serving: exit %d", code)
	}
}
