package cli

import (
	"context"
	"flag"
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
	return runSubcommand(ctx, "retention", retentionUsage, map[string]runFunc{
		"set": retentionSet("set").Run, "clear": retentionSet("clear").Run, "list": retentionList().Run,
	}, args, stdout, stderr)
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

// retentionSet is retention set, or retention clear (verb "clear": a
// policy without limits).
func retentionSet(verb string) command.Command[bool] {
	usage := "skald retention clear namespace|category NAME|stream NAME [--namespace NS]"
	if verb == "set" {
		usage = "skald retention set namespace|category NAME|stream NAME [--max-age DURATION] [--max-count N] [--namespace NS]"
	}
	var ns, age string
	var maxCount int64
	var p client.RetentionPolicy
	return command.Command[bool]{
		Name: "retention " + verb, Usage: usage, MinArgs: 1, MaxArgs: 2,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			fs.StringVar(&ns, "namespace", "", "the namespace (default: the token's own)")
			if verb == "set" {
				fs.StringVar(&age, "max-age", "", "remove messages older than this (e.g. 30d, 1d12h or 720h; 0: no age limit)")
				fs.Int64Var(&maxCount, "max-count", 0, "each stream keeps only the positions above its version - N (0: no count limit)")
			}
			return func(args []string) error {
				var maxAge time.Duration
				if age != "" {
					var err error
					if maxAge, err = parseDays(age); err != nil {
						return command.Mistake("--max-age %q: want a duration such as 720h, 30d or 1d12h", age)
					}
				}
				scope, name, err := retentionScope(args)
				if err != nil {
					return command.Mistake("%s", err)
				}
				if verb == "set" && maxAge == 0 && maxCount == 0 {
					return command.Mistake("give --max-age or --max-count (use 'skald retention clear' to remove a policy)")
				}
				p = client.RetentionPolicy{Scope: scope, Name: name, MaxAge: maxAge, MaxCount: maxCount}
				return nil
			}
		},
		Call: func(ctx context.Context, c *client.Client, _ []string) (bool, error) {
			return c.SetRetentionPolicy(ctx, ns, p)
		},
		Text: func(w io.Writer, _ []string, replaced bool) error {
			what := p.Scope.String()
			if p.Name != "" {
				what += " " + p.Name
			}
			switch {
			case verb == "clear" && replaced:
				fmt.Fprintf(w, "Removed the policy of %s.\n", what)
			case verb == "clear":
				fmt.Fprintf(w, "%s had no policy.\n", what)
			default:
				fmt.Fprintf(w, "Set the policy of %s: %s.\n", what, limits(p))
			}
			return nil
		},
		JSON: func(replaced bool) any { return &skaldv1.SetRetentionPolicyResponse{Replaced: replaced} },
	}
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

func retentionList() command.Command[[]client.RetentionPolicy] {
	var ns string
	return command.Command[[]client.RetentionPolicy]{
		Name: "retention list", Usage: "skald retention list [--namespace NS]", Flags: namespaceFlag(&ns),
		Call: func(ctx context.Context, c *client.Client, _ []string) ([]client.RetentionPolicy, error) {
			return c.RetentionPolicies(ctx, ns)
		},
		Text: func(w io.Writer, _ []string, ps []client.RetentionPolicy) error {
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
			return command.Table(w, "SCOPE\tNAME\tMAX-AGE\tMAX-COUNT", rows)
		},
		JSON: func(ps []client.RetentionPolicy) any { // the scopes as the API names them
			out := &skaldv1.ListRetentionPoliciesResponse{}
			for _, p := range ps {
				wp := &skaldv1.RetentionPolicy{Scope: skaldv1.RetentionScope(p.Scope), Name: p.Name, MaxCount: p.MaxCount}
				if p.MaxAge > 0 {
					wp.MaxAge = durationpb.New(p.MaxAge)
				}
				out.Policies = append(out.Policies, wp)
			}
			return out
		},
	}
}
