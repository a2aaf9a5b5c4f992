package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

const nsUsage = `Usage: skald ns <create|list|info|delete> ...

  skald ns create NAME [--description TEXT] [--ns-token TOKEN] [--dedupe-window D|off|forever]   (admin token)
  skald ns list                                                  (admin token)
  skald ns info NAME                                             (admin, or the namespace's own token)
  skald ns delete NAME [--yes]                                   (admin token)

A command that deletes asks first on a terminal; without one (a script, a pipe) it needs --yes.
`

func runNS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, nsUsage, command.ClientHelp)
		return command.Exit(command.ExitUsage, fmt.Errorf("ns: missing subcommand"))
	}
	switch args[0] {
	case "create":
		fs, cf := command.NewFlagSet("ns create", "skald ns create NAME [--description TEXT] [--ns-token TOKEN] [--dedupe-window D|off|forever]", stderr)
		desc := fs.String("description", "", "what the namespace is for")
		nsToken := fs.String("ns-token", "", "use this token for the namespace instead of a generated one")
		dedupe := fs.String("dedupe-window", "", "idempotent writes: how long message ids given by clients are remembered (a write of ids\n"+
			"already written returns the original positions): a duration of 1s or more, off, or forever (default: the server's, 2m)")
		rest, err := cf.Parse(fs, args[1:], 1, 1)
		if err != nil {
			return err
		}
		var opts []client.NamespaceOption
		switch *dedupe {
		case "":
		case "off", "0":
			opts = append(opts, client.WithDedupeWindow(0))
		case "forever":
			opts = append(opts, client.WithDedupeForever())
		default:
			d, err := time.ParseDuration(*dedupe)
			if err != nil {
				return command.Exit(command.ExitUsage, fmt.Errorf("ns create: --dedupe-window %q: want a duration (2m, 1h), off or forever", *dedupe))
			}
			opts = append(opts, client.WithDedupeWindow(d))
		}
		c, err := cf.Connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		ns, err := c.CreateNamespace(ctx, rest[0], *desc, *nsToken, opts...)
		if err != nil {
			return command.APIError(err)
		}
		if cf.Output == "json" {
			return command.PrintJSON(stdout, command.CreateReply(ns))
		}
		fmt.Fprintf(stdout, "Created namespace %s.\nToken (shown only now; keep it): %s\n", ns.Name, ns.Token)
		return nil
	case "list":
		fs, cf := command.NewFlagSet("ns list", "skald ns list", stderr)
		if _, err := cf.Parse(fs, args[1:], 0, 0); err != nil {
			return err
		}
		c, err := cf.Connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		list, err := c.ListNamespaces(ctx)
		if err != nil {
			return command.APIError(err)
		}
		if cf.Output == "json" {
			reply := &skaldv1.ListResponse{}
			for _, n := range list {
				reply.Namespaces = append(reply.Namespaces, command.NamespaceInfo(n))
			}
			return command.PrintJSON(stdout, reply)
		}
		var rows [][]string
		for _, n := range list {
			rows = append(rows, nsRow(n))
		}
		return command.Table(stdout, "NAME\tMESSAGES\tSTREAMS\tCREATED\tLAST ACTIVITY\tDESCRIPTION", rows)
	case "info":
		fs, cf := command.NewFlagSet("ns info", "skald ns info NAME", stderr)
		rest, err := cf.Parse(fs, args[1:], 1, 1)
		if err != nil {
			return err
		}
		c, err := cf.Connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		ns, err := c.GetNamespace(ctx, rest[0])
		if err != nil {
			return command.APIError(err)
		}
		if cf.Output == "json" {
			return command.PrintJSON(stdout, command.NamespaceInfo(ns))
		}
		row := append(nsRow(ns), dedupeOf(ns))
		return command.Table(stdout, "NAME\tMESSAGES\tSTREAMS\tCREATED\tLAST ACTIVITY\tDESCRIPTION\tDEDUPE WINDOW", [][]string{row})
	case "delete":
		fs, cf := command.NewFlagSet("ns delete", "skald ns delete NAME [--yes]", stderr)
		yes := command.AddYes(fs)
		rest, err := cf.Parse(fs, args[1:], 1, 1)
		if err != nil {
			return err
		}
		if err := command.Confirm("ns delete", fmt.Sprintf("deletes namespace %s and its messages", rest[0]),
			fmt.Sprintf("Delete namespace %s and every message in it? This cannot be undone.", rest[0]), *yes, os.Stdin, stderr); err != nil {
			return err
		}
		c, err := cf.Connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		ns, err := c.DeleteNamespace(ctx, rest[0])
		if err != nil {
			return command.APIError(err)
		}
		if cf.Output == "json" {
			return command.PrintJSON(stdout, command.DeleteReply(ns))
		}
		fmt.Fprintf(stdout, "Deleted namespace %s (%s).\n", ns.Name, plural(ns.MessagesDeleted, "message"))
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, nsUsage, command.ClientHelp)
		return nil
	}
	fmt.Fprint(stderr, nsUsage)
	return command.Exit(command.ExitUsage, fmt.Errorf("ns: unknown subcommand %q", args[0]))
}

func nsRow(n client.Namespace) []string {
	return []string{n.Name, strconv.FormatInt(n.MessageCount, 10), strconv.FormatInt(n.StreamCount, 10), when(n.CreatedAt), when(n.LastActivity), n.Description}
}

// dedupeOf is a namespace's idempotent-write window as ns create takes it.
func dedupeOf(n client.Namespace) string {
	switch {
	case n.DedupeForever:
		return "forever"
	case n.DedupeWindow == 0:
		return "off"
	}
	return n.DedupeWindow.String()
}

// when is t for a table; "-" for the zero time (none).
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
