//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"golang.org/x/sys/unix"
)

// openPTY returns the two ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// runOnTerminal runs skald with a terminal as standard input, typing
// answer into it.
func runOnTerminal(t *testing.T, env []string, answer string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	master, tty := openPTY(t)
	if _, err := master.WriteString(answer); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestDestructiveCommandsAsk: on a terminal, a destructive command asks
// first and does nothing unless the answer is yes.
func TestDestructiveCommandsAsk(t *testing.T) {
	t.Parallel()
	p := startServer(t, "", "--admin-token", testAdmin)
	admin := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	if _, errOut, code := runCLI(t, admin, "ns", "create", "doomed"); code != 0 {
		t.Fatal(errOut)
	}
	for _, typ := range []string{"A", "B"} {
		if _, errOut, code := runCLI(t, admin, "append", "kept-1", typ, `{}`); code != 0 {
			t.Fatal(errOut)
		}
	}
	cases := []struct {
		name, answer string
		args         []string
		code         int
		prompt       string
		stdout       string
	}{
		{"ns delete, no", "n\n", []string{"ns", "delete", "doomed"}, command.ExitFailure, "Delete namespace doomed and every message in it? This cannot be undone. [y/N] ", ""},
		{"ns delete, empty answer", "\n", []string{"ns", "delete", "doomed"}, command.ExitFailure, "[y/N] ", ""},
		{"stream delete, no", "no\n", []string{"stream", "delete", "kept-1"}, command.ExitFailure, "Delete every message of stream kept-1? [y/N] ", ""},
		{"truncate, no", "nope\n", []string{"stream", "truncate", "kept-1", "--before", "1"}, command.ExitFailure, "Remove the messages of stream kept-1 below position 1? [y/N] ", ""},
		{"ns delete, yes", "y\n", []string{"ns", "delete", "doomed"}, 0, "[y/N] ", "Deleted namespace doomed"},
		{"truncate, yes", "yes\n", []string{"stream", "truncate", "kept-1", "--before", "1"}, 0, "[y/N] ", "Truncated kept-1 before position 1: 1 message removed"},
	}
	for _, c := range cases {
		out, errOut, code := runOnTerminal(t, admin, c.answer, c.args...)
		if code != c.code || !strings.Contains(errOut, c.prompt) || !strings.Contains(out, c.stdout) {
			t.Errorf("%s: exit %d (want %d), stdout %q (want %q), stderr %q (want the prompt %q)", c.name, code, c.code, out, c.stdout, errOut, c.prompt)
		}
		if c.code == command.ExitFailure && !strings.Contains(errOut, "not confirmed; nothing changed") {
			t.Errorf("%s: stderr %q does not say nothing changed", c.name, errOut)
		}
	}
	if out, _, _ := runCLI(t, admin, "read", "kept-1", "-o", "json"); strings.Count(out, `"type"`) != 1 {
		t.Fatalf("after declining the delete and accepting the truncate, kept-1 holds %s; want only position 1", out)
	}
	if _, _, code := runCLI(t, admin, "ns", "info", "doomed"); code != command.ExitNotFound {
		t.Fatalf("ns info after a confirmed delete: exit %d", code)
	}
}
