package command

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestRunnerErrors runs commands through Command.Run against a real node
// and checks what main makes of each outcome (Report): the exit code and
// the line on stderr, in table and in JSON form, and what stdout holds.
func TestRunnerErrors(t *testing.T) {
	for _, env := range []string{"SKALD_ADDR", "SKALD_TOKEN", "SKALD_TOKEN_FILE", "SKALD_NS", "SKALD_CA"} {
		t.Setenv(env, "")
	}
	cl := testcluster.Start(t, 1)
	addr := strings.Join(cl.Endpoints(), ",")
	closed := closedAddr(t)

	getNS := Command[client.Namespace]{
		Name: "ns info", Usage: "skald ns info NAME", MinArgs: 1, MaxArgs: 1,
		Call: func(ctx context.Context, c *client.Client, args []string) (client.Namespace, error) {
			return c.GetNamespace(ctx, args[0])
		},
		Text: func(w io.Writer, _ []string, ns client.Namespace) error {
			_, err := fmt.Fprintf(w, "namespace %s\n", ns.Name)
			return err
		},
	}
	createNS := getNS
	createNS.Name = "ns create"
	createNS.Call = func(ctx context.Context, c *client.Client, args []string) (client.Namespace, error) {
		_, err := c.CreateNamespace(ctx, args[0], "", "")
		return client.Namespace{Name: args[0]}, err
	}
	appendAt := func(expected int64) Command[client.AppendResult] {
		return Command[client.AppendResult]{
			Name: "append", Usage: "skald append STREAM", MinArgs: 1, MaxArgs: 1,
			Call: func(ctx context.Context, c *client.Client, args []string) (client.AppendResult, error) {
				return c.Append(ctx, args[0], []client.NewMessage{{Type: "T", Data: []byte(`{}`)}}, client.ExpectVersion(expected))
			},
			Text: func(w io.Writer, _ []string, r client.AppendResult) error {
				_, err := fmt.Fprintf(w, "position %d\n", r.FirstPosition)
				return err
			},
		}
	}
	checked := getNS
	checked.Flags = func(fs *flag.FlagSet) func([]string) error {
		n := fs.Int("n", 0, "a number")
		return func([]string) error {
			switch {
			case *n < 0:
				return Mistake("--n %d: want 0 or more", *n)
			case *n > 9:
				return Exit(ExitConflict, errors.New("ns info: too many"))
			}
			return nil
		}
	}

	type run interface {
		Run(ctx context.Context, args []string, stdout, stderr io.Writer) error
	}
	admin := []string{"--addr", addr, "--token", testcluster.AdminToken}
	for _, tc := range []struct {
		name     string
		cmd      run
		args     []string
		code     int
		stdout   string // a regexp
		stderr   string // a regexp, of Report's line
		jsonCode string // the API code -o json reports; "" for none
	}{
		{"ok, text", getNS, append([]string{"default"}, admin...), ExitOK, `^namespace default\n$`, `^$`, ""},
		{"ok, json: the client type", getNS, append([]string{"default", "-o", "json"}, admin...), ExitOK,
			`^\{"name":"default","description":"[^"]*","createdAt":"[0-9-]+T[0-9:.]+Z","messageCount":\d+,"streamCount":\d+,"lastActivity":(null|"[^"]+"),"dedupeWindow":"\d+(\.\d+)?s","dedupeForever":(true|false)\}\n$`, `^$`, ""},
		{"not found", getNS, append([]string{"nope"}, admin...), ExitNotFound, `^$`, `^skald: not_found: namespace not found\n$`, "not_found"},
		{"already exists", createNS, append([]string{"default"}, admin...), ExitConflict, `^$`, `^skald: already_exists: `, "already_exists"},
		{"wrong expected version", appendAt(7), append([]string{"acct-1"}, admin...), ExitConflict, `^$`, `^skald: aborted: stream "acct-1" is at version -1, expected 7\n$`, "aborted"},
		{"invalid argument", appendAt(-1), append([]string{"not a stream name\x00"}, admin...), ExitUsage, `^$`, `^skald: invalid_argument: `, "invalid_argument"},
		{"bad token", getNS, []string{"default", "--addr", addr, "--token", "ns_ZGVmYXVsdA_" + strings.Repeat("1", 64)}, ExitAuth, `^$`, `^skald: unauthenticated: `, "unauthenticated"},
		{"no token", getNS, []string{"default", "--addr", addr}, ExitAuth, `^$`, `^skald: unauthenticated: no token: set SKALD_TOKEN`, ""},
		{"unreachable", getNS, []string{"default", "--addr", closed, "--token", testcluster.AdminToken}, ExitUnreachable, `^$`,
			`^skald: unreachable: no answer from ` + regexp.QuoteMeta(closed) + ` \(--addr or SKALD_ADDR\): `, ""},
		{"bad --addr", getNS, []string{"default", "--addr", "ftp://x", "--token", testcluster.AdminToken}, ExitUsage, `^$`, `^skald: --addr "ftp://x": scheme "ftp": want http or https\n$`, ""},
		{"bad -o", getNS, append([]string{"default", "-o", "yaml"}, admin...), ExitUsage, `^$`, `^skald: -o "yaml": want table or json\n$`, ""},
		{"argument count", getNS, admin, ExitUsage, `^$`,
			`^skald: ns info: wrong number of arguments \(usage: skald ns info NAME; see 'skald ns info --help'\)\n$`, ""},
		{"unknown flag", getNS, append([]string{"default", "--nope"}, admin...), ExitUsage, `^$`, `^skald: ns info: flag provided but not defined: -nope \(usage: `, ""},
		{"the check's mistake", checked, append([]string{"default", "--n", "-1"}, admin...), ExitUsage, `^$`,
			`^skald: ns info: --n -1: want 0 or more \(usage: skald ns info NAME; see 'skald ns info --help'\)\n$`, ""},
		{"the check's own exit code", checked, append([]string{"default", "--n", "10"}, admin...), ExitConflict, `^$`, `^skald: ns info: too many\n$`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testcluster.Timeout)
			defer cancel()
			for _, asJSON := range []bool{false, true} {
				args := tc.args
				if asJSON && !strings.Contains(strings.Join(args, " "), "-o ") {
					args = append(args[:len(args):len(args)], "-o", "json")
				} else if asJSON {
					continue
				}
				var stdout, stderr, flagOut bytes.Buffer
				code := ExitOK
				if err := tc.cmd.Run(ctx, args, &stdout, &flagOut); err != nil {
					code = Report(&stderr, args, err)
				}
				if code != tc.code {
					t.Fatalf("%v: exit %d, want %d; stderr %q", args, code, tc.code, stderr.String())
				}
				if asJSON {
					if code == ExitOK {
						continue // the success's JSON is its own case
					}
					want := fmt.Sprintf(`{"error":{"exitCode":%d,`, tc.code)
					if tc.jsonCode != "" {
						want += fmt.Sprintf(`"code":%q,`, tc.jsonCode)
					}
					if !strings.HasPrefix(stderr.String(), want+`"message":`) {
						t.Fatalf("%v: stderr %q, want it to start %s", args, stderr.String(), want)
					}
					continue
				}
				if !regexp.MustCompile(tc.stdout).MatchString(stdout.String()) {
					t.Errorf("%v: stdout %q, want %s", args, stdout.String(), tc.stdout)
				}
				if !regexp.MustCompile(tc.stderr).MatchString(stderr.String()) {
					t.Errorf("%v: stderr %q, want %s", args, stderr.String(), tc.stderr)
				}
			}
		})
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
