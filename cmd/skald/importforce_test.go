package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// TestImportForceNamesWhatItDeletes: import --force deletes the
// namespace's subscription groups with its messages, and both its help
// and its refusal without --yes say so (they named only messages).
func TestImportForceNamesWhatItDeletes(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, []string{"SKALD_ADDR=127.0.0.1:1", "SKALD_TOKEN=" + testAdmin}, "import", "--force", file)
	if code != command.ExitUsage || !strings.Contains(errOut, "every message and every subscription group") {
		t.Fatalf("import --force without --yes: exit %d, %s", code, errOut)
	}
	out, errOut, _ := runCLI(t, nil, "import", "--help")
	if help := out + errOut; !strings.Contains(help, "every subscription group") {
		t.Fatalf("import --help does not say --force deletes the groups:\n%s", help)
	}
}
