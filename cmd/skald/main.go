// Command skald is the Skald event store: the server and the command-line
// client in one binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `skald — a highly available event store

Usage:
  skald server [flags]          run a node (with no flags: a single node in ./skald-data on 127.0.0.1:8080)
  skald dev [--nodes 3]         run a local cluster of real server processes (data in ./skald-dev)
  skald ns create|list|info|delete
                                manage namespaces (admin token)
  skald append STREAM TYPE DATA-JSON [--expected-version N] [--tag T]... [--fail-if-tag T --after GP]
  skald append-multi FILE|-     append to several streams at once, all or nothing (JSON)
  skald read STREAM             read a stream
  skald query --type T --tag A --tag B [--after GP]
                                read the messages of a type and tags (DCB; see skald query --help)
  skald category NAME           read a category [--member M --size S --correlation C]
  skald stream delete|truncate|delete-by-watermark
                                remove messages (see skald stream --help)
  skald retention set|list|clear
                                retention policies: max-age, max-count (see skald retention --help)
  skald sub create|list|info|update|delete|consume|parked|replay
                                persistent subscriptions (see skald sub --help)
  skald tail [STREAM | --category C | --all]
                                follow new messages until Ctrl-C
  skald cluster status|transfer-leadership|remove
  skald leave --addr NODE       make a node leave the cluster and stop
  skald backup --out FILE       a consistent snapshot of the whole cluster state (admin token)
  skald restore --from FILE --data-dir DIR
                                seed a new single-node cluster from a backup
  skald export [--category C] [--since TIME] [--gzip] > FILE
                                export the token's namespace as NDJSON (EventoDB format)
  skald import FILE [--force]   import an export into the token's namespace
  skald tls init                make a CA and node certificates for trying TLS
  skald bench [--workload W]    measure a running cluster (see skald bench --help)
  skald probe URL               exit 0 when GET URL answers 200 (container health checks)
  skald version [-o json]       print the version, the commit and the Go version

Client commands take --addr (SKALD_ADDR), --token (SKALD_TOKEN) and -o table|json.

Run 'skald <command> --help' for a command's flags.
`

// exitError carries a process exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

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
	if !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "skald:", err)
	} else {
		code = 0
	}
	os.Exit(code)
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
	case "stream":
		return runStream(ctx, args[1:], stdout, stderr)
	case "retention":
		return runRetention(ctx, args[1:], stdout, stderr)
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
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return &exitError{2, fmt.Errorf("unknown command %q", args[0])}
}
