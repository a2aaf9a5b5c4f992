package main

import (
	"strings"
	"testing"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// export --since takes only times a message can carry: one past 2262
// used to wrap and export everything.
func TestExportSinceRange(t *testing.T) {
	t.Parallel()
	env := []string{"SKALD_ADDR=127.0.0.1:1", "SKALD_TOKEN=" + testAdmin}
	for _, since := range []string{"3000-01-01T00:00:00Z", "1000-01-01T00:00:00Z"} {
		_, errOut, code := runCLI(t, env, "export", "--since", since)
		if code != command.ExitUsage || !strings.Contains(errOut, "want a time from 1677-09-21") {
			t.Errorf("--since %s: exit %d, want %d naming the range: %s", since, code, command.ExitUsage, errOut)
		}
	}
}
