package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// Shell completion: `skald completion bash|zsh|fish` prints a script that
// asks the binary itself (`skald __complete WORD...`) for candidates, so
// what it offers is always the commands and flags this binary has: the
// flags are read from each command's own --help.

// Subcommands are the second words of the commands that take one. A
// command absent here takes none. TestCompletionKnowsEveryCommand holds
// this table to run's dispatch and to the usage text.
var Subcommands = map[string][]string{
	"ns":         {"create", "list", "info", "delete"},
	"token":      {"create", "list", "revoke"},
	"stream":     {"delete", "truncate", "delete-by-watermark"},
	"retention":  {"set", "list", "clear"},
	"index":      {"create", "list", "info", "rebuild", "pause", "resume", "delete", "query"},
	"sub":        {"create", "list", "info", "update", "delete", "consume", "parked", "replay"},
	"cluster":    {"status", "transfer-leadership", "remove"},
	"dev":        {"kill", "restart"},
	"tls":        {"init"},
	"completion": {"bash", "zsh", "fish"},
	"help":       helpTopicNames(),
}

// Commands are the first words, in the usage text's order.
var Commands = []string{"server", "dev", "ns", "token", "append", "append-multi", "read", "all", "query", "category", "stream",
	"retention", "index", "sub", "tail", "cluster", "leave", "backup", "restore", "export", "import", "tls", "bench",
	"probe", "version", "completion", "help"}

func runCompletion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 || !slices.Contains(Subcommands["completion"], args[0]) {
		fmt.Fprint(stderr, completionUsage)
		if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return command.Exit(2, fmt.Errorf("completion: name one shell: bash, zsh or fish"))
	}
	fmt.Fprint(stdout, completionScripts[args[0]])
	return nil
}

const completionUsage = `Usage: skald completion bash|zsh|fish

Prints a completion script for the shell. Load it with, for example:
  bash:  source <(skald completion bash)            (or save it in /etc/bash_completion.d/skald)
  zsh:   source <(skald completion zsh)             (before compinit has run: autoload -U compinit; compinit)
  fish:  skald completion fish > ~/.config/fish/completions/skald.fish
`

var completionScripts = map[string]string{
	"bash": `# bash completion for skald (skald completion bash)
_skald() {
    local IFS=$'\n'
    COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)" -- "${COMP_WORDS[COMP_CWORD]}"))
}
complete -o default -F _skald skald
`,
	"zsh": `#compdef skald
# zsh completion for skald (skald completion zsh)
_skald() {
    local -a candidates
    candidates=("${(@f)$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    compadd -a candidates
}
compdef _skald skald
`,
	"fish": `# fish completion for skald (skald completion fish)
function __skald_complete
    set -l words (commandline -opc) (commandline -ct)
    $words[1] __complete $words[2..-1] 2>/dev/null
end
complete -c skald -f -a '(__skald_complete)'
`,
}

// runComplete prints the candidates for the last of args (the word being
// typed, maybe empty), one per line: commands, then subcommands, then the
// command's flags; files are the shell's default.
func runComplete(ctx context.Context, args []string, stdout io.Writer, all Program) error {
	if len(args) == 0 {
		args = []string{""}
	}
	prev, cur := args[:len(args)-1], args[len(args)-1]
	var out []string
	switch {
	case len(prev) == 0:
		out = Commands
	case len(prev) == 1 && Subcommands[prev[0]] != nil && !strings.HasPrefix(cur, "-"):
		out = Subcommands[prev[0]]
	case strings.HasPrefix(cur, "-"):
		cmd := prev[:1]
		if len(prev) > 1 && slices.Contains(Subcommands[prev[0]], prev[1]) {
			cmd = prev[:2]
		}
		out = commandFlags(ctx, cmd, all)
	}
	for _, c := range out {
		if strings.HasPrefix(c, cur) {
			fmt.Fprintln(stdout, c)
		}
	}
	return nil
}

// flagLine matches a flag in Go's flag.PrintDefaults output.
var flagLine = regexp.MustCompile(`(?m)^\s+-(-?[A-Za-z0-9][A-Za-z0-9-]*)`)

// commandFlags are the flags cmd's --help lists, as --name.
func commandFlags(ctx context.Context, cmd []string, all Program) []string {
	if cmd[0] == "help" || cmd[0] == "completion" || cmd[0] == "version" {
		return nil
	}
	var help bytes.Buffer
	all(ctx, append(slices.Clone(cmd), "--help"), &help, &help)
	var out []string
	for _, m := range flagLine.FindAllStringSubmatch(help.String(), -1) {
		name := strings.TrimPrefix(m[1], "-")
		f := "--" + name
		if len(name) == 1 {
			f = "-" + name // -o, as the usage texts write it
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}
