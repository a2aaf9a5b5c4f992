package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// TestServerSecretFileUsageError: the binary exits 2 with the message when
// a secret is given both ways, before it opens anything.
func TestServerSecretFileUsageError(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(file, []byte(testAdmin), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "never")
	_, errOut, code := runCLI(t, nil, "server", "--data-dir", dataDir, "--admin-token", testAdmin, "--admin-token-file", file)
	if code != command.ExitUsage || !strings.Contains(errOut, "--admin-token (or SKALD_ADMIN_TOKEN) and --admin-token-file (or SKALD_ADMIN_TOKEN_FILE) are both set") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused start created %s (%v)", dataDir, err)
	}
}
