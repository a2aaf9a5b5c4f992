package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

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
	return runSubcommand(ctx, "ns", nsUsage, map[string]runFunc{
		"create": nsCreate().Run, "list": nsList.Run, "info": nsInfo.Run, "delete": nsDelete(stderr).Run,
	}, args, stdout, stderr)
}

// nsCreate is ns create; its flags reach the call through the closures.
func nsCreate() command.Command[client.CreatedNamespace] {
	var desc, nsToken, dedupe *string
	var opts []client.NamespaceOption
	return command.Command[client.CreatedNamespace]{
		Name: "ns create", Usage: "skald ns create NAME [--description TEXT] [--ns-token TOKEN] [--dedupe-window D|off|forever]",
		MinArgs: 1, MaxArgs: 1,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			desc = fs.String("description", "", "what the namespace is for")
			nsToken = fs.String("ns-token", "", "use this token for the namespace instead of a generated one")
			dedupe = fs.String("dedupe-window", "", "idempotent writes: how long message ids given by clients are remembered (a write of ids\n"+
				"already written returns the original positions): a duration of 1s or more, off, or forever (default: the server's, 2m)")
			return func([]string) error {
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
				return nil
			}
		},
		Call: func(ctx context.Context, c *client.Client, args []string) (client.CreatedNamespace, error) {
			return c.CreateNamespace(ctx, args[0], *desc, *nsToken, opts...)
		},
		Text: func(w io.Writer, _ []string, ns client.CreatedNamespace) error {
			_, err := fmt.Fprintf(w, "Created namespace %s.\nToken (shown only now; keep it): %s\n", ns.Name, ns.Token)
			return err
		},
	}
}

var nsList = command.Command[[]client.Namespace]{
	Name: "ns list", Usage: "skald ns list",
	Call: func(ctx context.Context, c *client.Client, _ []string) ([]client.Namespace, error) {
		return c.ListNamespaces(ctx)
	},
	Text: func(w io.Writer, _ []string, list []client.Namespace) error {
		var rows [][]string
		for _, n := range list {
			rows = append(rows, nsRow(n))
		}
		return command.Table(w, "NAME\tMESSAGES\tSTREAMS\tCREATED\tLAST ACTIVITY\tDESCRIPTION", rows)
	},
	JSON: func(list []client.Namespace) any {
		return struct{ Namespaces []client.Namespace }{list}
	},
}

var nsInfo = command.Command[client.Namespace]{
	Name: "ns info", Usage: "skald ns info NAME", MinArgs: 1, MaxArgs: 1,
	Call: func(ctx context.Context, c *client.Client, args []string) (client.Namespace, error) {
		return c.GetNamespace(ctx, args[0])
	},
	Text: func(w io.Writer, _ []string, ns client.Namespace) error {
		row := append(nsRow(ns), dedupeOf(ns))
		return command.Table(w, "NAME\tMESSAGES\tSTREAMS\tCREATED\tLAST ACTIVITY\tDESCRIPTION\tDEDUPE WINDOW", [][]string{row})
	},
}

// nsDelete is ns delete: it asks on stderr's terminal first.
func nsDelete(stderr io.Writer) command.Command[client.DeletedNamespace] {
	var yes *bool
	return command.Command[client.DeletedNamespace]{
		Name: "ns delete", Usage: "skald ns delete NAME [--yes]", MinArgs: 1, MaxArgs: 1,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			yes = command.AddYes(fs)
			return func(args []string) error {
				return command.Confirm("ns delete", fmt.Sprintf("deletes namespace %s and its messages", args[0]),
					fmt.Sprintf("Delete namespace %s and every message in it? This cannot be undone.", args[0]), *yes, os.Stdin, stderr)
			}
		},
		Call: func(ctx context.Context, c *client.Client, args []string) (client.DeletedNamespace, error) {
			return c.DeleteNamespace(ctx, args[0])
		},
		Text: func(w io.Writer, _ []string, ns client.DeletedNamespace) error {
			_, err := fmt.Fprintf(w, "Deleted namespace %s (%s).\n", ns.Name, plural(ns.MessagesDeleted, "message"))
			return err
		},
	}
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
