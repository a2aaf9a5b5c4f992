package command

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Destructive commands (ns delete, stream delete and truncate, watermark
// deletion, cluster remove, sub delete, forgetting parked messages,
// import --force) ask on a terminal before they act, and without one
// need --yes, as nats stream rm does (-f): a script says so once, a typo
// at a prompt costs nothing.

// AddYes adds --yes to a destructive command's flags.
func AddYes(fs *flag.FlagSet) *bool {
	return fs.Bool("yes", false, "do it without asking (required when standard input is not a terminal)")
}

// Confirm lets a destructive command go on: at once with --yes (yes);
// on a terminal when the user answers y or yes to question; otherwise it
// returns the error to stop with, saying nothing changed. what says what
// the command would do, for the error without a terminal; a nil stdin
// is no terminal.
func Confirm(cmd, what, question string, yes bool, stdin *os.File, stderr io.Writer) error {
	if yes {
		return nil
	}
	if stdin == nil || !IsTerminal(stdin) {
		return Exit(ExitUsage, fmt.Errorf("%s: %s: pass --yes to confirm (no terminal to ask on)", cmd, what))
	}
	fmt.Fprintf(stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return Exit(ExitFailure, fmt.Errorf("%s: not confirmed; nothing changed", cmd))
}
