// Command skald is the Skald event store: the server and the command-line
// client in one binary.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"connectrpc.com/connect"
)

const usage = `skald — a highly available event store

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

// exitError carries a process exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err == nil {
		return
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		code = 0
	case wantsJSON(os.Args[1:]):
		printJSONError(os.Stderr, code, err)
	default:
		fmt.Fprintln(os.Stderr, "skald:", err)
	}
	os.Exit(code)
}

// wantsJSON reports whether a command line asks for -o json, flags being
// anywhere before "--" as parseInterspersed takes them: errors are then
// JSON too.
func wantsJSON(args []string) bool {
	for i, a := range args {
		switch a {
		case "--":
			return false
		case "-o", "--o":
			if i+1 < len(args) && args[i+1] == "json" {
				return true
			}
		case "-o=json", "--o=json":
			return true
		}
	}
	return false
}

// printJSONError writes a command's error as one JSON object:
// {"error":{"exitCode":4,"code":"not_found","message":"..."}}, code being
// the API's when a server answered.
func printJSONError(w io.Writer, exitCode int, err error) {
	type jsonError struct {
		ExitCode int    `json:"exitCode"`
		Code     string `json:"code,omitempty"`
		Message  string `json:"message"`
	}
	e := jsonError{ExitCode: exitCode, Message: err.Error()}
	var ce *connect.Error
	if errors.As(err, &ce) {
		e.Code = ce.Code().String()
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(struct {
		Error jsonError `json:"error"`
	}{e})
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{2, errors.New("missing command")}
	}
	switch args[0] {
	case "server":
		return runServer(ctx, args[1:], stdout, stderr)
	case "dev":
		return runDev(ctx, args[1:], stdout, stderr)
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
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
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
		return runComplete(ctx, args[1:], stdout)
	case "help", "-h", "--help":
		return runHelp(args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return &exitError{2, fmt.Errorf("unknown command %q", args[0])}
}
