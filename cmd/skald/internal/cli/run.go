package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// Usage is the binary's usage text: every command, one line or two each.
const Usage = `skald — a highly available event store

Usage:
  skald server [flags]          run a node (with no flags: a single node in ./skald-data on 127.0.0.1:8080)
  skald dev [--nodes 3]         run a local cluster of real server processes (data in ./skald-dev)
  skald dev kill|restart N      kill -9 a node of the running dev cluster, or start it again
  skald ns create|list|info|delete
                                manage namespaces (admin token)
  skald token create|list|revoke
                                a namespace's credentials: roles, scopes, expiry (see skald token --help)
  skald append STREAM TYPE DATA-JSON [--expected-version N] [--tag T]... [--fail-if-tag T --after GP]
  skald append-multi FILE|-     append to several streams at once, all or nothing (JSON)
  skald read STREAM             read a stream
  skald query --type T --tag A --tag B [--after GP]
                                read the messages of a type and tags (DCB; see skald query --help)
  skald category NAME           read a category [--member M --size S --correlation C]
  skald all                     read the whole namespace [--type T --prefix P]
                                (read, category, all: --backward, --last N)
  skald stream delete|truncate|delete-by-watermark
                                remove messages (see skald stream --help)
  skald retention set|list|clear
                                retention policies: max-age, max-count (see skald retention --help)
  skald index create|list|info|delete|query
                                find events by their fields: user-defined indexes (see skald index --help)
  skald sub create|list|info|update|delete|consume|parked|replay
                                persistent subscriptions (see skald sub --help)
  skald tail [STREAM | --category C | --all]
                                follow new messages until Ctrl-C (--from-start replays)
  skald cluster status|transfer-leadership|remove
  skald leave --addr NODE       make a node leave the cluster and stop
  skald backup --out FILE       a consistent snapshot of the whole cluster state (admin token)
  skald restore --from FILE --data-dir DIR
                                seed a new single-node cluster from a backup
  skald export [--category C] [--since TIME] [--gzip] > FILE
                                export the token's namespace as NDJSON (EventoDB format)
  skald import FILE|- [--force] import an export into the token's namespace
  skald tls init                make a CA and node certificates for trying TLS
  skald bench [--workload W]    measure a running cluster (see skald bench --help)
  skald probe URL               exit 0 when GET URL answers 200 (container health checks)
  skald version [-o json]       print the version, the commit and the Go version
  skald completion bash|zsh|fish
                                print a shell completion script
  skald help [TOPIC]            this text, or a topic: exit-codes, consistency, tokens

Client commands take --addr (SKALD_ADDR; a list tries each), --token (SKALD_TOKEN) and -o table|json.
Commands that delete ask on a terminal; scripts pass --yes.

Run 'skald <command> --help' for a command's flags.
`

// Program runs a whole command line of the skald binary, as main does:
// completion and help call it to read a command's --help, whichever
// program the command belongs to.
type Program func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Run runs a client command: args[0] names it. all is the whole binary's
// dispatch, for completion.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, all Program) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, Usage)
		return command.Exit(command.ExitUsage, errors.New("missing command"))
	}
	switch args[0] {
	case "tls":
		return runTLS(ctx, args[1:], stdout, stderr)
	case "ns":
		return runNS(ctx, args[1:], stdout, stderr)
	case "token":
		return runToken(ctx, args[1:], stdout, stderr)
	case "append":
		return runAppend(ctx, args[1:], stdout, stderr)
	case "append-multi":
		return runAppendMulti(ctx, args[1:], stdout, stderr)
	case "read":
		return runRead(ctx, args[1:], stdout, stderr)
	case "query":
		return runQuery(ctx, args[1:], stdout, stderr)
	case "category":
		return runCategory(ctx, args[1:], stdout, stderr)
	case "all":
		return runAll(ctx, args[1:], stdout, stderr)
	case "stream":
		return runStream(ctx, args[1:], stdout, stderr)
	case "retention":
		return runRetention(ctx, args[1:], stdout, stderr)
	case "index":
		return runIndex(ctx, args[1:], stdout, stderr)
	case "sub":
		return runSub(ctx, args[1:], stdout, stderr)
	case "tail":
		return runTail(ctx, args[1:], stdout, stderr)
	case "cluster":
		return runCluster(ctx, args[1:], stdout, stderr)
	case "probe":
		return runProbe(ctx, args[1:], stdout, stderr)
	case "backup":
		return runBackup(ctx, args[1:], stdout, stderr)
	case "restore":
		return runRestore(ctx, args[1:], stdout, stderr)
	case "leave":
		return runLeave(ctx, args[1:], stdout, stderr)
	case "export":
		return runExport(ctx, args[1:], stdout, stderr)
	case "import":
		return runImport(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "completion":
		return runCompletion(ctx, args[1:], stdout, stderr)
	case "__complete":
		return runComplete(ctx, args[1:], stdout, all)
	case "help", "-h", "--help":
		return runHelp(args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, Usage)
	return command.Exit(command.ExitUsage, fmt.Errorf("unknown command %q", args[0]))
}

// runFunc runs a command with the words after its name.
type runFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// runSubcommand runs the subcommand args[0] of the command name (ns,
// token, ...) from subs. Help prints usage and the connection flags' help
// on stdout; a missing subcommand prints them on stderr, an unknown one
// usage alone, each with a usage error.
func runSubcommand(ctx context.Context, name, usage string, subs map[string]runFunc, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage, command.ClientHelp)
		return command.Exit(command.ExitUsage, fmt.Errorf("%s: missing subcommand", name))
	}
	if run, ok := subs[args[0]]; ok {
		return run(ctx, args[1:], stdout, stderr)
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage, command.ClientHelp)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return command.Exit(command.ExitUsage, fmt.Errorf("%s: unknown subcommand %q", name, args[0]))
}
