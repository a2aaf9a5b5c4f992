package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/internal/testutil"
)

// TestCLIIndex drives `skald index` through the built binary against a
// server: create, list, info, query by equality, range and prefix, pages
// by cursor, delete, and the refusals with their exit codes.
func TestCLIIndex(t *testing.T) {
	t.Parallel()
	p := startServer(t, "", "--admin-token", testAdmin)
	admin := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	out, _, code := runCLI(t, admin, "ns", "create", "shop", "-o", "json")
	var created struct{ Token string }
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil {
		t.Fatalf("ns create: exit %d, %q", code, out)
	}
	shop := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + created.Token}
	for i, sku := range []string{"apple", "apricot", "banana", "apple", "cherry"} {
		if _, stderr, code := runCLI(t, shop, "append", fmt.Sprintf("order-%d", i), "Sold", fmt.Sprintf(`{"sku":%q,"qty":%d}`, sku, i*10-10)); code != 0 {
			t.Fatalf("append: exit %d: %s", code, stderr)
		}
	}
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		stdout string // regexp
		stderr string // substring
	}{
		{"create", shop, []string{"index", "create", "by-sku", "--type", "Sold", "--field", "data:/sku:string", "--field", "data:/qty:int"}, 0,
			`^Created index by-sku: data:/sku:string, data:/qty:int; every node builds it from its log now\.\n$`, ""},
		{"create by category as admin", admin, []string{"index", "create", "by-qty", "--category", "order", "--field", "data:/qty:int", "--namespace", "shop"}, 0, `^Created index by-qty`, ""},
		{"equality", shop, []string{"index", "query", "by-sku", "--eq", "apple"}, 0, `(?s)^GPOS\s+VALUES\s+STREAM\s+POS\s+TYPE\s+DATA\n1\s+apple \| -10\s+order-0\s+0\s+Sold\s+\{"sku":"apple","qty":-10\}\s*\n4\s+apple \| 20\s+order-3.*\n$`, ""},
		{"prefix", shop, []string{"index", "query", "by-sku", "--prefix", "ap", "--positions"}, 0, `(?s)^GPOS\s+VALUES\n1\s+apple \| -10\s*\n4\s+apple \| 20\s*\n2\s+apricot \| 0\s*\n$`, ""},
		{"range descending", shop, []string{"index", "query", "by-qty", "--from", "-10", "--before", "20", "--desc", "--positions"}, 0, `(?s)^GPOS\s+VALUES\n3\s+10\s*\n2\s+0\s*\n1\s+-10\s*\n$`, ""},
		// The queries above waited for both indexes: they are healthy.
		{"local", shop, []string{"index", "query", "by-qty", "--eq", "30", "--local", "--positions"}, 0, `(?s)^GPOS\s+VALUES\n5\s+30\s*\n$`, ""},
		{"list", shop, []string{"index", "list"}, 0, `(?s)^NAME\s+VERSION\s+SOURCE\s+FIELDS\s+STATE\s+ENTRIES\s+SKIPPED\s+LAG\nby-qty\s+1\s+category order\s+data:/qty:int\s+healthy\s+5\s+0\s+0\s*\nby-sku\s+1\s+types Sold\s+data:/sku:string, data:/qty:int\s+healthy\s+5\s+0\s+0\s*\n$`, ""},
		{"info json", shop, []string{"index", "info", "by-sku", "-o", "json"}, 0, `"entries":5,`, ""},
		{"bad field", shop, []string{"index", "create", "x", "--type", "Sold", "--field", "data:/sku:number"}, command.ExitUsage, `^$`, `type "number": want string, int, float, time or bool`},
		{"no field", shop, []string{"index", "create", "x", "--type", "Sold"}, command.ExitUsage, `^$`, `give at least one --field`},
		{"no source", shop, []string{"index", "create", "x", "--field", "type"}, command.ExitUsage, `^$`, `give the events to index: --category, --type or --tag`},
		{"bad pointer", shop, []string{"index", "create", "x", "--type", "Sold", "--field", "data:sku:string"}, command.ExitUsage, `^$`, `definition.fields[0].pointer`},
		{"exists", shop, []string{"index", "create", "by-sku", "--type", "Sold", "--field", "type"}, command.ExitConflict, `^$`, `already_exists`},
		{"value of another type", shop, []string{"index", "query", "by-qty", "--eq", "lots"}, command.ExitUsage, `^$`, `equal[0]: must be an integer`},
		{"both bounds", shop, []string{"index", "query", "by-qty", "--from", "1", "--after", "2"}, command.ExitUsage, `^$`, `give --from or --after, not both`},
		{"unknown index", shop, []string{"index", "query", "nope"}, command.ExitNotFound, `^$`, `not_found`},
		{"another namespace", shop, []string{"index", "list", "--namespace", "default"}, command.ExitAuth, `^$`, `permission_denied`},
		{"unknown subcommand", shop, []string{"index", "rename", "by-sku"}, command.ExitUsage, `^$`, `unknown subcommand "rename"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, tc.env, tc.args...)
			if code != tc.code || !regexp.MustCompile(tc.stdout).MatchString(stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %s)\nstderr %q (want %q)", code, tc.code, stdout, tc.stdout, stderr, tc.stderr)
			}
		})
	}

	// Pages by cursor: two of two, then the last one.
	var seen []string
	args := []string{"index", "query", "by-qty", "--limit", "2", "--positions"}
	for range 4 {
		stdout, stderr, code := runCLI(t, shop, args...)
		if code != 0 {
			t.Fatalf("page: exit %d: %s", code, stderr)
		}
		seen = append(seen, regexp.MustCompile(`(?m)^(\d+)\s`).FindAllString(stdout, -1)...)
		m := regexp.MustCompile(`next page: --cursor (\S+)`).FindStringSubmatch(stdout)
		if m == nil {
			break
		}
		args = []string{"index", "query", "by-qty", "--limit", "2", "--positions", "--cursor", m[1]}
	}
	if got := strings.Join(strings.Fields(strings.Join(seen, " ")), ","); got != "1,2,3,4,5" {
		t.Fatalf("pages read %s, want 1..5", got)
	}

	// A stream index: order-0's latest sku moves from apple to cherry.
	if stdout, stderr, code := runCLI(t, shop, "index", "create", "last-sku", "--kind", "stream", "--category", "order", "--field", "data:/sku:string"); code != 0 ||
		stdout != "Created index last-sku (per stream): data:/sku:string; every node builds it from its log now.\n" {
		t.Fatalf("create stream index: exit %d, %q, %s", code, stdout, stderr)
	}
	if _, stderr, code := runCLI(t, shop, "append", "order-0", "Sold", `{"sku":"cherry","qty":1}`); code != 0 {
		t.Fatalf("append: exit %d: %s", code, stderr)
	}
	for _, tc := range []struct {
		args   []string
		stdout string
	}{
		{[]string{"--eq", "apple", "--positions"}, `(?s)^GPOS\s+VALUES\s+STREAM\n4\s+apple\s+order-3\s*\n$`},
		{[]string{"--eq", "cherry", "--positions"}, `(?s)^GPOS\s+VALUES\s+STREAM\n5\s+cherry\s+order-4\s*\n6\s+cherry\s+order-0\s*\n$`},
	} {
		stdout, stderr, code := runCLI(t, shop, append([]string{"index", "query", "last-sku"}, tc.args...)...)
		if code != 0 || !regexp.MustCompile(tc.stdout).MatchString(stdout) {
			t.Fatalf("stream index query %v: exit %d, %q (want %s), %s", tc.args, code, stdout, tc.stdout, stderr)
		}
	}
	if _, stderr, code := runCLI(t, shop, "index", "create", "x", "--kind", "doc", "--type", "Sold", "--field", "type"); code != command.ExitUsage || !strings.Contains(stderr, `--kind "doc": want event or stream`) {
		t.Fatalf("bad kind: exit %d, %s", code, stderr)
	}

	// A rebuild under a new version: qty as a float. Queries answer from
	// version 1 until the node built version 2, then from it.
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		// Its source (category order) is kept: only --field is given.
		{"new version", []string{"by-qty", "--version", "2", "--field", "data:/qty:float"}, 0,
			"Rebuilding index by-qty (version 2): data:/qty:float; every node answers from the current definition until it has built this one.\n", ""},
		{"as it is", []string{"last-sku"}, 0, "Rebuilding index last-sku (version 1): data:/sku:string; every node answers from the current definition until it has built this one.\n", ""},
		{"a version without fields", []string{"by-qty", "--version", "3"}, command.ExitUsage, "", "--version defines a new version: give its --field(s) too"},
		{"unknown index", []string{"nope"}, command.ExitNotFound, "", "not_found"},
		{"bad field", []string{"by-qty", "--field", "data:/qty:number"}, command.ExitUsage, "", `type "number"`},
	} {
		t.Run("rebuild "+tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, shop, append([]string{"index", "rebuild"}, tc.args...)...)
			if code != tc.code || stdout != tc.stdout || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", code, tc.code, stdout, tc.stdout, stderr, tc.stderr)
			}
		})
	}
	testutil.Eventually(t, 30*time.Second, "by-qty to answer from version 2", func() bool {
		stdout, _, code := runCLI(t, shop, "index", "list")
		return code == 0 && regexp.MustCompile(`(?m)^by-qty\s+2\s+category order\s+data:/qty:float\s+healthy\s+6\s`).MatchString(stdout)
	})
	if stdout, stderr, code := runCLI(t, shop, "index", "query", "by-qty", "--eq", "1.0", "--positions"); code != 0 || !regexp.MustCompile(`(?s)^GPOS\s+VALUES\n6\s+1\s*\n$`).MatchString(stdout) {
		t.Fatalf("query of version 2: exit %d, %q, %s", code, stdout, stderr)
	}

	// Pause and resume: a paused index answers --local queries with its
	// lag; one that waits for it is refused at once, naming the state.
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // regexp
		stderr string
	}{
		{"pause", []string{"index", "pause", "by-sku"}, 0, `^Paused index by-sku on every node; it keeps answering --local queries\.\n$`, ""},
		{"pause again", []string{"index", "pause", "by-sku"}, 0, `^Paused index by-sku`, ""},
		{"append while paused", []string{"append", "order-9", "Sold", `{"sku":"damson","qty":3}`}, 0, ``, ""},
		{"list paused", []string{"index", "list"}, 0, `(?m)^by-sku\s+1\s+types Sold\s+data:/sku:string, data:/qty:int\s+paused\s+6\s+0\s+1\s*$`, ""},
		{"local query", []string{"index", "query", "by-sku", "--prefix", "d", "--local", "--positions"}, 0, `^GPOS\s+VALUES\n\(this node's index lags 1 events\)\n$`, ""},
		{"waiting query", []string{"index", "query", "by-sku", "--prefix", "d"}, command.ExitConflict, `^$`, `failed_precondition: fsm: index is paused: index "by-sku" does not hold every event the read must see; resume it, or read at LOCAL consistency (skald index query --local)`},
		{"pause unknown", []string{"index", "pause", "nope"}, command.ExitNotFound, `^$`, `not_found`},
		{"resume without name", []string{"index", "resume"}, command.ExitUsage, `^$`, ``},
		{"resume", []string{"index", "resume", "by-sku"}, 0, `^Resumed index by-sku; every node continues from its checkpoint\.\n$`, ""},
		{"query after resume", []string{"index", "query", "by-sku", "--prefix", "d", "--positions"}, 0, `(?s)^GPOS\s+VALUES\n7\s+damson \| 3\s*\n$`, ""},
		// A memory index answers the same query from each node's memory.
		{"create in memory", []string{"index", "create", "mem-sku", "--type", "Sold", "--field", "data:/sku:string", "--storage", "memory"}, 0, `^Created index mem-sku: data:/sku:string`, ""},
		{"query in memory", []string{"index", "query", "mem-sku", "--prefix", "d", "--positions"}, 0, `(?s)^GPOS\s+VALUES\n7\s+damson\s*\n$`, ""},
		{"info in memory", []string{"index", "info", "mem-sku"}, 0, `(?m)^mem-sku\s+1\s+types Sold; in memory\s+data:/sku:string\s+healthy\s+7\s`, ""},
		{"bad storage", []string{"index", "create", "x", "--type", "Sold", "--field", "type", "--storage", "ram"}, command.ExitUsage, `^$`, `--storage "ram": want pebble or memory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, shop, tc.args...)
			if code != tc.code || !regexp.MustCompile(tc.stdout).MatchString(stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %s)\nstderr %q (want %q)", code, tc.code, stdout, tc.stdout, stderr, tc.stderr)
			}
		})
	}

	if stdout, _, code := runCLI(t, shop, "index", "delete", "by-sku"); code != 0 || stdout != "Deleted index by-sku.\n" {
		t.Fatalf("delete: exit %d, %q", code, stdout)
	}
	if _, _, code := runCLI(t, shop, "index", "info", "by-sku"); code != command.ExitNotFound {
		t.Fatalf("info after delete: exit %d, want %d", code, command.ExitNotFound)
	}
}
