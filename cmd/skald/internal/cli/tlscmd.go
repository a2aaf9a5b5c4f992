package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/node/transport"
)

func runTLS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "init" {
		fmt.Fprint(stderr, "Usage: skald tls init [--dir ./skald-tls] [--nodes 3] [--hosts 127.0.0.1,localhost]\n")
		return command.Exit(command.ExitUsage, fmt.Errorf("tls: want the init subcommand"))
	}
	fs := flag.NewFlagSet("skald tls init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "./skald-tls", "folder for the CA and the node certificates")
	nodes := fs.Int("nodes", 3, "how many node certificates (node0..)")
	hosts := fs.String("hosts", "127.0.0.1,localhost", "comma-separated IPs and DNS names every node certificate is valid for")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: skald tls init [flags]\n\nMakes a CA and node certificates for trying TLS out (use your own PKI in production).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var names []string
	for i := 0; i < *nodes; i++ {
		names = append(names, fmt.Sprintf("node%d", i))
	}
	if err := transport.GenerateTLS(*dir, names, strings.Split(*hosts, ",")); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Wrote %s/ca.pem and node0..node%d certificates.\nStart each node with:\n  skald server --tls-cert %s/node0.pem --tls-key %s/node0-key.pem --tls-ca %s/ca.pem ...\nand call it with: skald ... --addr https://127.0.0.1:8080 --ca %s/ca.pem\n",
		*dir, *nodes-1, *dir, *dir, *dir, *dir)
	return nil
}
