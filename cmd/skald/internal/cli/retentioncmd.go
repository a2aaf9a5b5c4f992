package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

const retentionUsage = `Usage: skald retention <set|list|clear> ...

  skald retention set namespace|category NAME|stream NAME [--max-age DURATION] [--max-count N]
      set the policy of the whole namespace, of one category (the text before a stream
      name's first '-': "account" covers account-1 and account-2+retry), or of one stream,
      replacing the one it had. --max-age (e.g. 30d, 1d12h or 720h): messages older than this go.
      --max-count: each stream keeps only the positions above its version - N.
  skald retention list
      list the namespace's policies
  skald retention clear namespace|category NAME|stream NAME
      remove a scope's policy

Each takes --namespace NS (default: the token's own namespace; the admin token may name any
but "default", which takes no policy). Limits combine: a message goes when any policy covering
its stream removes it. The leader applies them every --retention-interval of 'skald server'
(default 10s), so a stream may briefly hold more; removed messages are gone from every read and
positions are never reused. A negative limit or a malformed name: exit 2 (nothing changed); an
unknown namespace: exit 4.
`

func runRetention(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, retentionUsage, command.ClientHelp)
		return command.Exit(command.ExitUsage, fmt.Errorf("retention: missing subcommand"))
	}
	switch args[0] {
	case "set", "clear":
		return runRetentionSet(ctx, args[0], args[1:], stdout, stderr)
	case "list":
		return runRetentionList(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, retentionUsage, command.ClientHelp)
		return nil
	}
	fmt.Fprint(stderr, retentionUsage)
	return command.Exit(command.ExitUsage, fmt.Errorf("retention: unknown subcommand %q", args[0]))
}

// retentionScope reads "namespace", "category NAME" or "stream NAME".
func retentionScope(args []string) (client.RetentionScope, string, error) {
	scopes := map[string]client.RetentionScope{"namespace": client.ScopeNamespace, "category": client.ScopeCategory, "stream": client.ScopeStream}
	scope, ok := scopes[args[0]]
	switch {
	case !ok:
		return 0, "", fmt.Errorf("unknown scope %q: namespace, category NAME or stream NAME", args[0])
	case scope == client.ScopeNamespace && len(args) != 1:
		return 0, "", fmt.Errorf("the namespace scope takes no name")
	case scope != client.ScopeNamespace && len(args) != 2:
		return 0, "", fmt.Errorf("the %s scope needs a name", args[0])
	}
	if scope == client.ScopeNamespace {
		return scope, "", nil
	}
	return scope, args[1], nil
}

func runRetentionSet(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	usage := "skald retention clear namespace|category NAME|stream NAME [--namespace NS]"
	if verb == "set" {
		usage = "skald retention set namespace|category NAME|stream NAME [--max-age DURATION] [--max-count N] [--namespace NS]"
	}
	fs, cf := command.NewFlagSet("retention "+verb, usage, stderr)
	ns := fs.String("namespace", "", "the namespace (default: the token's own)")
	var age string
	var maxCount int64
	if verb == "set" {
		fs.StringVar(&age, "max-age", "", "remove messages older than this (e.g. 30d, 1d12h or 720h; 0: no age limit)")
		fs.Int64Var(&maxCount, "max-count", 0, "each stream keeps only the positions above its version - N (0: no count limit)")
	}
	rest, err := cf.Parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	var maxAge time.Duration
	if age != "" {
		if maxAge, err = parseDays(age); err != nil {
			return cf.UsageError(fs, fmt.Sprintf("--max-age %q: want a duration such as 720h, 30d or 1d12h", age))
		}
	}
	scope, name, err := retentionScope(rest)
	if err != nil {
		return cf.UsageError(fs, err.Error())
	}
	if verb == "set" && maxAge == 0 && maxCount == 0 {
		return cf.UsageError(fs, "give --max-age or --max-count (use 'skald retention clear' to remove a policy)")
	}
	c, err := cf.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	p := client.RetentionPolicy{Scope: scope, Name: name, MaxAge: maxAge, MaxCount: maxCount}
	replaced, err := c.SetRetentionPolicy(ctx, *ns, p)
	if err != nil {
		return command.APIError(err)
	}
	if cf.Output == "json" {
		return command.PrintJSON(stdout, &skaldv1.SetRetentionPolicyResponse{Replaced: replaced})
	}
	what := scope.String()
	if name != "" {
		what += " " + name
	}
	switch {
	case verb == "clear" && replaced:
		fmt.Fprintf(stdout, "Removed the policy of %s.\n", what)
	case verb == "clear":
		fmt.Fprintf(stdout, "%s had no policy.\n", what)
	default:
		fmt.Fprintf(stdout, "Set the policy of %s: %s.\n", what, limits(p))
	}
	return nil
}

func limits(p client.RetentionPolicy) string {
	age, count := "no age limit", "no count limit"
	if p.MaxAge > 0 {
		age = "max-age " + formatDays(p.MaxAge)
	}
	if p.MaxCount > 0 {
		count = "max-count " + strconv.FormatInt(p.MaxCount, 10)
	}
	return age + ", " + count
}

func runRetentionList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("retention list", "skald retention list [--namespace NS]", stderr)
	ns := fs.String("namespace", "", "the namespace (default: the token's own)")
	if _, err := cf.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	c, err := cf.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ps, err := c.RetentionPolicies(ctx, *ns)
	if err != nil {
		return command.APIError(err)
	}
	if cf.Output == "json" {
		out := &skaldv1.ListRetentionPoliciesResponse{}
		for _, p := range ps {
			wp := &skaldv1.RetentionPolicy{Scope: skaldv1.RetentionScope(p.Scope), Name: p.Name, MaxCount: p.MaxCount}
			if p.MaxAge > 0 {
				wp.MaxAge = durationpb.New(p.MaxAge)
			}
			out.Policies = append(out.Policies, wp)
		}
		return command.PrintJSON(stdout, out)
	}
	rows := make([][]string, 0, len(ps))
	for _, p := range ps {
		age, count := "-", "-"
		if p.MaxAge > 0 {
			age = formatDays(p.MaxAge)
		}
		if p.MaxCount > 0 {
			count = strconv.FormatInt(p.MaxCount, 10)
		}
		rows = append(rows, []string{p.Scope.String(), p.Name, age, count})
	}
	return command.Table(stdout, "SCOPE\tNAME\tMAX-AGE\tMAX-COUNT", rows)
}
