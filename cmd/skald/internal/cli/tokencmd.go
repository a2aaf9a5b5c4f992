package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

const tokenUsage = `Usage: skald token <create|list|revoke> ...

  skald token create NAME --role reader|writer|owner|admin [--scope C,P*] [--expires 30d|TIME] [--ns NAME]
  skald token list [--ns NAME]
  skald token revoke NAME [--ns NAME]

A namespace's credentials (docs/access.md). They need an unscoped owner token of the namespace,
or an admin token with --ns naming it (--ns, like SKALD_NS, works on every client command). --scope lists categories (invoice) and stream-name
prefixes (invoice-*) the credential may touch; --expires is a duration from now (30d, 12h) or
an RFC 3339 time. The namespace's first token is the credential named initial. A new token is
printed once: the server keeps only its hash. Once revoke returns, no node admits the token.
`

var roleByName = map[string]client.Role{"reader": client.RoleReader, "writer": client.RoleWriter, "owner": client.RoleOwner, "admin": client.RoleAdmin}

func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "token", tokenUsage, map[string]runFunc{
		"create": tokenCreate().Run, "list": tokenList.Run, "revoke": tokenRevoke.Run,
	}, args, stdout, stderr)
}

// tokenCreate is token create; its flags reach the call through the
// closures.
func tokenCreate() command.Command[client.CreatedCredential] {
	var role, scope, expires *string
	var n client.NewCredential
	return command.Command[client.CreatedCredential]{
		Name: "token create", Usage: "skald token create NAME --role ROLE [--scope C,P*] [--expires 30d|TIME] [--ns NAME]",
		MinArgs: 1, MaxArgs: 1,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			role = fs.String("role", "", "reader, writer, owner or admin (admin: the admin namespace only)")
			scope = fs.String("scope", "", "comma-separated categories (invoice) and stream-name prefixes (invoice-*); default: the whole namespace")
			expires = fs.String("expires", "", "a duration from now (30d, 12h) or an RFC 3339 time; default: never")
			return func(args []string) error {
				r, ok := roleByName[*role]
				if !ok {
					return command.Exit(command.ExitUsage, fmt.Errorf("token create: --role %q: want reader, writer, owner or admin", *role))
				}
				n = client.NewCredential{Name: args[0], Role: r}
				if *scope != "" {
					n.Scope = strings.Split(*scope, ",")
				}
				if *expires != "" {
					var err error
					if n.ExpiresAt, err = parseExpiry(*expires, time.Now()); err != nil {
						return command.Exit(command.ExitUsage, fmt.Errorf("token create: --expires %q: %v", *expires, err))
					}
				}
				return nil
			}
		},
		Call: func(ctx context.Context, c *client.Client, _ []string) (client.CreatedCredential, error) {
			return c.CreateCredential(ctx, n)
		},
		Text: func(w io.Writer, _ []string, made client.CreatedCredential) error {
			_, err := fmt.Fprintf(w, "Created credential %s (%s).\nToken (shown only now; keep it): %s\n", made.Name, made.Role, made.Token)
			return err
		},
		JSON: func(made client.CreatedCredential) any { // the role as the API names it
			return &skaldv1.CredentialsCreateResponse{Credential: credentialProto(made.Credential), Token: made.Token, Index: made.Index}
		},
	}
}

var tokenList = command.Command[[]client.Credential]{
	Name: "token list", Usage: "skald token list [--ns NAME]",
	Call: func(ctx context.Context, c *client.Client, _ []string) ([]client.Credential, error) {
		return c.Credentials(ctx, "")
	},
	Text: func(w io.Writer, _ []string, list []client.Credential) error {
		var rows [][]string
		for _, cr := range list {
			scope := strings.Join(cr.Scope, ",")
			if scope == "" {
				scope = "*"
			}
			rows = append(rows, []string{cr.Name, cr.Role.String(), scope, when(cr.ExpiresAt), when(cr.CreatedAt), when(cr.LastUsed)})
		}
		return command.Table(w, "NAME\tROLE\tSCOPE\tEXPIRES\tCREATED\tLAST USED", rows)
	},
	JSON: func(list []client.Credential) any { // the roles as the API names them
		reply := &skaldv1.CredentialsListResponse{}
		for _, cr := range list {
			reply.Credentials = append(reply.Credentials, credentialProto(cr))
		}
		return reply
	},
}

var tokenRevoke = command.Command[struct{}]{
	Name: "token revoke", Usage: "skald token revoke NAME [--ns NAME]", MinArgs: 1, MaxArgs: 1,
	Call: func(ctx context.Context, c *client.Client, args []string) (struct{}, error) {
		return struct{}{}, c.RevokeCredential(ctx, "", args[0])
	},
	Text: func(w io.Writer, args []string, _ struct{}) error {
		_, err := fmt.Fprintf(w, "Revoked credential %s.\n", args[0])
		return err
	},
	JSON: func(struct{}) any { return &skaldv1.CredentialsRevokeResponse{} }, // index 0, as it always printed
}

// parseExpiry reads --expires: a duration from now (30d, 12h) or an RFC
// 3339 time.
func parseExpiry(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := parseDays(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("want a positive duration (30d, 12h) or an RFC 3339 time")
	}
	return now.Add(d), nil
}

func credentialProto(c client.Credential) *skaldv1.Credential {
	out := &skaldv1.Credential{Name: c.Name, Role: skaldv1.Role(c.Role), Scope: c.Scope, Initial: c.Initial}
	for _, f := range []struct {
		t   time.Time
		dst **timestamppb.Timestamp
	}{{c.ExpiresAt, &out.ExpiresAt}, {c.CreatedAt, &out.CreatedAt}, {c.LastUsed, &out.LastUsed}} {
		if !f.t.IsZero() {
			*f.dst = timestamppb.New(f.t)
		}
	}
	return out
}
