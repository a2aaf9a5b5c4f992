package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skalddb/skald/cmd/skald/internal/cli"
)

// The completion candidates come from the binary itself: commands,
// subcommands, and the flags each command's --help lists.
func TestComplete(t *testing.T) {
	t.Parallel()
	cases := []struct {
		words   []string
		want    []string // all present
		exactly bool     // and nothing else
	}{
		{[]string{"re"}, []string{"read", "restore", "retention"}, true},
		{[]string{""}, cli.Commands, true},
		{[]string{"ns", ""}, []string{"create", "list", "info", "delete"}, true},
		{[]string{"sub", "c"}, []string{"create", "consume"}, true},
		{[]string{"read", "--"}, []string{"--addr", "--token", "--limit", "--position"}, false},
		{[]string{"read", "-"}, []string{"-o"}, false},
		{[]string{"ns", "create", "--"}, []string{"--description", "--token"}, false},
		{[]string{"server", "--cluster-s"}, []string{"--cluster-secret", "--cluster-secret-file"}, true},
		{[]string{"help", ""}, []string{"consistency", "exit-codes", "tokens"}, true},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}, true},
		{[]string{"read", "account-1", ""}, nil, true}, // a stream name: the shell's default
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.words, " "), func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, append([]string{"__complete"}, tc.words...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			got := strings.Fields(out)
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("missing %q in %q", w, got)
				}
			}
			if tc.exactly && len(got) != len(tc.want) {
				t.Errorf("got %q, want exactly %q", got, tc.want)
			}
		})
	}
}

// The bash script, loaded into a real bash, completes through the binary.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script, _, code := runCLI(t, nil, "completion", "bash")
	if code != 0 || !strings.Contains(script, "complete -o default -F _skald skald") {
		t.Fatalf("completion bash: exit %d\n%s", code, script)
	}
	cmd := exec.Command(bash, "--norc", "-c", script+`
COMP_WORDS=(skald cluster t); COMP_CWORD=2; _skald; printf '%s\n' "${COMPREPLY[@]}"`)
	cmd.Env = []string{"PATH=" + filepath.Dir(binary)}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "transfer-leadership" {
		t.Fatalf("skald cluster t<TAB> offered %q, want transfer-leadership", got)
	}
	if _, errOut, code := runCLI(t, nil, "completion", "tcsh"); code != 2 || !strings.Contains(errOut, "bash, zsh or fish") {
		t.Fatalf("completion tcsh: exit %d %s", code, errOut)
	}
}

// Every command completion offers is dispatched, every command the usage
// names is offered, and every subcommand is one its command takes.
func TestCompletionKnowsEveryCommand(t *testing.T) {
	t.Parallel()
	for _, c := range cli.Commands {
		err := run(context.Background(), []string{c, "--help"}, io.Discard, io.Discard)
		if err != nil && strings.Contains(err.Error(), "unknown command") {
			t.Errorf("completion offers %q, which run does not know", c)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^  skald ([a-z-]+)`).FindAllStringSubmatch(cli.Usage, -1) {
		if !slices.Contains(cli.Commands, m[1]) {
			t.Errorf("the usage names %q, which completion does not offer", m[1])
		}
	}
	for cmd, subs := range cli.Subcommands {
		if cmd == "help" || cmd == "completion" {
			continue
		}
		for _, sub := range subs {
			// A subcommand's --help is flag.ErrHelp; one the command does
			// not take is a usage error.
			if err := run(context.Background(), []string{cmd, sub, "--help"}, io.Discard, io.Discard); err != nil && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%s %s: %v", cmd, sub, err)
			}
		}
	}
}

// skald help TOPIC prints what no command's --help holds.
func TestHelpTopics(t *testing.T) {
	t.Parallel()
	cases := []struct {
		topic string
		want  string
		code  int
	}{
		{"exit-codes", "7  unreachable", 0},
		{"consistency", "linearizable", 0},
		{"tokens", "ns_<base64url(namespace)", 0},
		{"", "Help topics: skald help [consistency exit-codes tokens]", 0},
		{"nope", "no topic", 2},
	}
	for _, tc := range cases {
		t.Run(tc.topic, func(t *testing.T) {
			args := []string{"help"}
			if tc.topic != "" {
				args = append(args, tc.topic)
			}
			out, errOut, code := runCLI(t, nil, args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Fatalf("help %s: exit %d, want %d with %q:\n%s%s", tc.topic, code, tc.code, tc.want, out, errOut)
			}
		})
	}
}
