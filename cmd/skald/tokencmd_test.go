package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// skald token create|list|revoke through the built binary: a scoped
// writer writes its category only, the owner lists and revokes it, and
// the admin reaches the namespace with --ns.
func TestTokenCLI(t *testing.T) {
	t.Parallel()
	p := startServer(t, "", "--admin-token", testAdmin)
	admin := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	out, _, code := runCLI(t, admin, "ns", "create", "shop", "-o", "json")
	var created struct{ Token string }
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil {
		t.Fatalf("ns create: exit %d %q", code, out)
	}
	shop := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + created.Token}
	out, errOut, code := runCLI(t, shop, "token", "create", "billing", "--role", "writer", "--scope", "invoice", "--expires", "30d", "-o", "json")
	var made struct {
		Token      string
		Credential struct {
			Name, Role string
			Scope      []string
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &made) != nil || !strings.HasPrefix(made.Token, "ns_c2hvcA_") ||
		made.Credential.Role != "ROLE_WRITER" || strings.Join(made.Credential.Scope, ",") != "invoice" {
		t.Fatalf("token create: exit %d %q %q", code, out, errOut)
	}
	billing := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + made.Token}
	cases := []struct {
		name     string
		env      []string
		args     []string
		code     int
		stdout   string // regexp
		stderrRe string
	}{
		{"write in scope", billing, []string{"append", "invoice-1", "Issued", `{}`}, 0, `position 0`, ""},
		{"write out of scope", billing, []string{"append", "order-1", "Placed", `{}`}, command.ExitAuth, `^$`,
			`permission_denied: credential "billing" \(role writer, scope invoice\) of namespace "shop" may not call skald\.v1\.EventStore/Append on stream "order-1": it is outside the credential's scope`},
		{"read the whole namespace scoped", billing, []string{"all"}, command.ExitAuth, `^$`, `it reaches the whole namespace and needs an unscoped credential`},
		{"a writer may not list tokens", billing, []string{"token", "list"}, command.ExitAuth, `^$`, `may not call skald\.v1\.Credentials/List: it needs the owner role`},
		{"no role", shop, []string{"token", "create", "x"}, command.ExitUsage, `^$`, `--role "": want reader, writer, owner or admin`},
		{"bad expiry", shop, []string{"token", "create", "x", "--role", "reader", "--expires", "soon"}, command.ExitUsage, `^$`, `--expires "soon": want a positive duration`},
		{"bad scope", shop, []string{"token", "create", "x", "--role", "reader", "--scope", "a-b"}, command.ExitUsage, `^$`, `invalid_argument: scope\[0\]: "a-b" is not a category`},
		{"name taken", shop, []string{"token", "create", "billing", "--role", "reader"}, command.ExitConflict, `^$`, `already_exists`},
		{"owner may not make an admin", shop, []string{"token", "create", "x", "--role", "admin"}, command.ExitAuth, `^$`, `may not create a credential of role admin`},
		{"admin creates in shop", admin, []string{"token", "create", "reports", "--role", "reader", "--ns", "shop"}, 0, `^Created credential reports \(reader\)\.\nToken \(shown only now; keep it\): ns_c2hvcA_[0-9a-f]{64}\n$`, ""},
		{"list", shop, []string{"token", "list"}, 0, `(?s)^NAME\s+ROLE\s+SCOPE\s+EXPIRES\s+CREATED\s+LAST USED\nbilling\s+writer\s+invoice\s+\d{4}-[^\n]*\ninitial\s+owner\s+\*\s+-\s+\S+\s+\d{4}-[^\n]*\nreports\s+reader\s+\*\s+-\s+\S+\s+-\s*\n$`, ""},
		{"a namespace token may not name another", shop, []string{"token", "list", "--ns", "default"}, command.ExitAuth, `^$`,
			`permission_denied: credential "initial" \(role owner\) of namespace "shop" may not act on namespace "default": only an admin credential may name another namespace`},
		{"admin reads shop's stream", admin, []string{"read", "invoice-1", "--ns", "shop"}, 0, `(?s)^STREAM[^\n]*\ninvoice-1\s+0\s+1\s+Issued`, ""},
		{"admin through SKALD_NS", append([]string{"SKALD_NS=shop"}, admin...), []string{"read", "invoice-1"}, 0, `invoice-1\s+0\s+1\s+Issued`, ""},
		{"admin names a missing namespace", admin, []string{"read", "invoice-1", "--ns", "nope"}, command.ExitNotFound, `^$`, `namespace "nope" \(Skald-Namespace\) does not exist`},
		{"revoke", shop, []string{"token", "revoke", "billing"}, 0, `^Revoked credential billing\.\n$`, ""},
		{"revoked token refused", billing, []string{"append", "invoice-1", "Issued", `{}`}, command.ExitAuth, `^$`, `unauthenticated`},
		{"revoke again", shop, []string{"token", "revoke", "billing"}, command.ExitNotFound, `^$`, `not_found`},
		{"admin revokes shop's initial", admin, []string{"token", "revoke", "initial", "--ns", "shop"}, 0, `^Revoked credential initial\.\n$`, ""},
		{"the initial token is refused", shop, []string{"token", "list"}, command.ExitAuth, `^$`, `unauthenticated`},
		{"help", nil, []string{"token", "--help"}, 0, `skald token create NAME --role`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, c.env, c.args...)
			if code != c.code || !regexp.MustCompile(c.stdout).MatchString(out) || (c.stderrRe != "" && !regexp.MustCompile(c.stderrRe).MatchString(errOut)) {
				t.Fatalf("skald %v: exit %d, stdout %q, stderr %q; want exit %d, stdout /%s/, stderr /%s/", c.args, code, out, errOut, c.code, c.stdout, c.stderrRe)
			}
		})
	}
}
