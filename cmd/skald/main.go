// Command skald is the Skald event store: the server and the command-line
// client in one binary. main only dispatches: each program lives in a
// package of its own under internal/ (server, dev, bench, cli), and
// internal/command holds what the client programs share.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/skalddb/skald/cmd/skald/internal/bench"
	"github.com/skalddb/skald/cmd/skald/internal/cli"
	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/cmd/skald/internal/dev"
	"github.com/skalddb/skald/cmd/skald/internal/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err == nil {
		return
	}
	os.Exit(command.Report(os.Stderr, os.Args[1:], err))
}

// run runs one command line: the server, dev and bench programs by their
// first word, every other command by cli.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "server":
			return server.Run(ctx, args[1:], stdout, stderr)
		case "dev":
			return dev.Run(ctx, args[1:], stdout, stderr)
		case "bench":
			return bench.Run(ctx, args[1:], stdout, stderr)
		}
	}
	return cli.Run(ctx, args, stdout, stderr, run)
}
