package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/internal/testutil"
)

// TestSubCLI drives skald sub against a real server process, in order.
func TestSubCLI(t *testing.T) {
	t.Parallel()
	p := startServer(t, "", "--admin-token", testAdmin)
	env := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string // regexp
		stderr string // regexp
	}{
		{"create", []string{"sub", "create", "g", "--category", "job", "--max-retries", "0", "--checkpoint-after", "1"}, 0,
			`(?s)Created group g\..*source:\s+category job.*max retries:\s+0`, ""},
		{"create taken", []string{"sub", "create", "g", "--all"}, command.ExitConflict, `^$`, `already_exists`},
		{"create two sources", []string{"sub", "create", "x", "--all", "--stream", "a-1"}, command.ExitUsage, `^$`, `exactly one of`},
		{"create out of range", []string{"sub", "create", "x", "--all", "--ack-timeout", "2h"}, command.ExitUsage, `^$`, `invalid_argument: settings.ack_timeout: must be 100ms..1h0m0s`},
		{"append 1", []string{"append", "job-1", "Run", `{"n":1}`}, 0, ``, ""},
		{"append 2", []string{"append", "job-2", "Run", `{"n":2}`}, 0, ``, ""},
		{"consume", []string{"sub", "consume", "g", "--count", "2"}, 0, `^job-1\t0\t1\tRun\t1\t\{"n":1\}\njob-2\t0\t2\tRun\t1\t\{"n":2\}\n$`, ""},
		{"info", []string{"sub", "info", "g", "-o", "json"}, 0, `"name":"g".*"category":"job"`, ""},
		{"list", []string{"sub", "list"}, 0, `(?s)GROUP.*g\s+category job\s+\d+\s+0\s+round-robin`, ""},
		{"update", []string{"sub", "update", "g", "--strategy", "pinned"}, 0, `(?s)Updated group g\..*strategy:\s+pinned`, ""},
		{"update bad strategy", []string{"sub", "update", "g", "--strategy", "random"}, command.ExitUsage, `^$`, `--strategy must be`},
		{"parked", []string{"sub", "parked", "g"}, 0, `0 parked in all\.`, ""},
		{"replay unknown", []string{"sub", "replay", "g", "5"}, command.ExitNotFound, `^$`, `not_found`},
		{"info unknown", []string{"sub", "info", "nope"}, command.ExitNotFound, `^$`, `not_found: subscription group not found`},
		{"delete", []string{"sub", "delete", "g", "--yes"}, 0, `Deleted group g\.`, ""},
		// A group on a query: only the tagged messages that match.
		{"create on tags", []string{"sub", "create", "q", "--type", "Run", "--tag", "urgent"}, 0,
			`(?s)Created group q\..*source:\s+query \{"items":\[\{"types":\["Run"\],"tags":\["urgent"\]\}\]\}`, ""},
		{"create query and category", []string{"sub", "create", "x", "--category", "job", "--tag", "a"}, command.ExitUsage, `^$`, `exactly one of`},
		{"create --query and --tag", []string{"sub", "create", "x", "--tag", "a", "--query", `{"items":[{"tags":["b"]}]}`}, command.ExitUsage, `^$`, `not both`},
		{"create empty query item", []string{"sub", "create", "x", "--query", `{"items":[{}]}`}, command.ExitUsage, `^$`, `invalid_argument: query\.items\[0\]: must name at least one type or tag`},
		{"append tagged", []string{"append", "job-3", "Run", `{"n":3}`, "--tag", "urgent"}, 0, ``, ""},
		{"append untagged", []string{"append", "job-4", "Run", `{"n":4}`}, 0, ``, ""},
		{"append other type", []string{"append", "job-5", "Stop", `{"n":5}`, "--tag", "urgent"}, 0, ``, ""},
		{"append tagged 2", []string{"append", "job-6", "Run", `{"n":6}`, "--tag", "urgent", "--tag", "x"}, 0, ``, ""},
		{"consume query", []string{"sub", "consume", "q", "--count", "2"}, 0, `^job-3\t0\t3\tRun\t1\t\{"n":3\}\njob-6\t0\t6\tRun\t1\t\{"n":6\}\n$`, ""},
		{"list query", []string{"sub", "list"}, 0, `(?s)GROUP.*q\s+query \{"items":\[\{"types":\["Run"\],"tags":\["urgent"\]\}\]\}\s+\d+`, ""},
		{"info query json", []string{"sub", "info", "q", "-o", "json"}, 0, `"query":\s*\{"items":\s*\[\{"types":\s*\["Run"\],\s*"tags":\s*\["urgent"\]\}\]\}`, ""},
		{"unknown subcommand", []string{"sub", "frob"}, command.ExitUsage, `^$`, `(?s)^Usage.*unknown subcommand "frob"`},
	}
	for _, c := range cases {
		out, errOut, code := runCLI(t, env, c.args...)
		if code != c.code || !regexp.MustCompile(c.stdout).MatchString(out) || !regexp.MustCompile(c.stderr).MatchString(errOut) {
			t.Fatalf("%s: exit %d (want %d)\nstdout: %q (want %s)\nstderr: %q (want %s)", c.name, code, c.code, out, c.stdout, errOut, c.stderr)
		}
		if c.name == "consume" {
			// The acks were checkpointed (after every settle): a new consumer gets nothing old.
			testutil.Until(t, 10*time.Second, "the checkpoint at 3", func() (bool, string) {
				out, _, _ := runCLI(t, env, "sub", "info", "g")
				return regexp.MustCompile(`checkpoint:\s+3\b`).MatchString(out), out
			})
		}
	}
}

// TestSubParkedSaysMoreFollow: a page of parked messages that fills
// --limit says how to list the rest, as read does.
func TestSubParkedSaysMoreFollow(t *testing.T) {
	t.Parallel()
	p := startServer(t, "", "--admin-token", testAdmin)
	env := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	for _, args := range [][]string{
		{"sub", "create", "pk", "--stream", "pk-1", "--max-retries", "0"},
		{"append", "pk-1", "Run", `{"n":1}`},
		{"append", "pk-1", "Run", `{"n":2}`},
		// Received and left unacknowledged: with no retries, the
		// consumer's leaving parks both.
		{"sub", "consume", "pk", "--count", "2", "--no-ack"},
	} {
		if out, errOut, code := runCLI(t, env, args...); code != 0 {
			t.Fatalf("skald %q: exit %d: %s %s", args, code, out, errOut)
		}
	}
	testutil.Until(t, 30*time.Second, "both messages parked", func() (bool, string) {
		out, errOut, _ := runCLI(t, env, "sub", "parked", "pk")
		return strings.Contains(out, "2 parked in all."), out + errOut
	})
	out, errOut, code := runCLI(t, env, "sub", "parked", "pk", "--limit", "1")
	if m := regexp.MustCompile(`(?m)^-- 1 message shown; more follow: skald sub parked pk --after (\d+) --limit 1$`).FindStringSubmatch(errOut); code != 0 || m == nil {
		t.Fatalf("sub parked --limit 1: exit %d: %s %s", code, out, errOut)
	}
	if _, errOut, _ := runCLI(t, env, "sub", "parked", "pk", "--limit", "2"); strings.Contains(errOut, "more follow") {
		t.Fatalf("sub parked --limit 2 (all of them) says more follow: %s", errOut)
	}
}
