package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// runCLIStdin is runCLI with stdin as the command's standard input.
func runCLIStdin(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// storedData reads the messages of stream through the Connect API's JSON
// (data as base64), so the exact bytes stored show, where the CLI would
// re-encode them.
func storedData(t *testing.T, addr, token, stream string) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/skald.v1.EventStore/ReadStream", strings.NewReader(`{"stream":"`+stream+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Messages []struct {
			Data     string `json:"data"`
			Metadata string `json:"metadata"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ReadStream %s: %d %v", stream, resp.StatusCode, err)
	}
	var out []string
	for _, m := range r.Messages {
		d, _ := base64.StdEncoding.DecodeString(m.Data)
		md, _ := base64.StdEncoding.DecodeString(m.Metadata)
		out = append(out, string(d)+"|"+string(md))
	}
	return out
}

// TestCLIEdges drives the rough edges of issue 31 (items 9, 10, 12 and 15)
// against one real server, in order.
func TestCLIEdges(t *testing.T) {
	t.Parallel()
	p := startServer(t, "", "--admin-token", testAdmin)
	admin := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	dataFile := write("data.json", "{\"a\":1}\n")
	metaFile := write("meta.json", "{\"by\":\"ann\"}\r\n")
	camelFile := write("camel.json", `{"streams":[{"stream":"mc-1","expectedVersion":-1,"messages":[{"type":"A","data":{}}]}]}`)
	camelConflict := write("camel-conflict.json", `{"streams":[{"stream":"mc-1","expectedVersion":7,"messages":[{"type":"A","data":{}}]}]}`)
	bothSpellings := write("both.json", `{"streams":[{"stream":"mc-1","expectedVersion":0,"expected_version":0,"messages":[{"type":"A","data":{}}]}]}`)
	noToken := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN="}
	cases := []struct {
		name   string
		env    []string
		stdin  string
		args   []string
		code   int
		stdout string // regexp
		stderr string // regexp
	}{
		// 9: a list of endpoints, as etcdctl --endpoints; a dead one is skipped.
		{"addr list, first down", admin, "", []string{"ns", "list", "--addr", "127.0.0.1:1," + p.addr}, 0, `(?s)NAME.*default`, `^$`},
		{"addr list, last down", admin, "", []string{"append", "ep-1", "T", `{}`, "--addr", p.addr + ",127.0.0.1:1"}, 0, `^Appended to ep-1 at position 0`, `^$`},
		{"addr list all down", admin, "", []string{"ns", "list", "--addr", "127.0.0.1:1,127.0.0.1:2"}, command.ExitUnreachable, `^$`, `unreachable: no answer from 127\.0\.0\.1:[12]`},
		{"leave addr list", admin, "", []string{"leave", "--addr", p.addr + ",127.0.0.1:1"}, command.ExitUsage, `^$`, `--addr names the node that leaves: give one node`},
		{"backup addr list, first down", admin, "", []string{"backup", "--out", filepath.Join(dir, "list.bak"), "--addr", "127.0.0.1:1," + p.addr}, 0, `^Backed up \d+ bytes at Raft index \d+ to `, ``},
		{"addr not a URL", admin, "", []string{"ns", "list", "--addr", "http://"}, command.ExitUsage, `^$`, `--addr "http://": no host`},
		{"probe help", nil, "", []string{"probe", "--help"}, 0, `^$`, `(?s)Usage: skald probe URL.*exit 0 when`},
		// 15: a host without a port means Skald's port, 8080 (nothing
		// listens on 127.0.0.2).
		{"addr without a port", admin, "", []string{"ns", "list", "--addr", "127.0.0.2"}, command.ExitUnreachable, `^$`, `no answer from 127\.0\.0\.2:8080 `},
		// 10: data from a file or stdin loses its trailing newline (checked below).
		{"append data file", admin, "", []string{"append", "nl-1", "T", "@" + dataFile, "--metadata", "@" + metaFile}, 0, `position 0`, `^$`},
		{"append data stdin", admin, "{\"b\":2}\n\n", []string{"append", "nl-1", "T", "-"}, 0, `position 1`, `^$`},
		// 12: -o json prints int64 values as numbers in every command.
		{"append json numbers", admin, "", []string{"append", "js-1", "T", `{}`, "-o", "json"}, 0, `^\{"firstPosition":0,"lastPosition":0,"firstGlobalPosition":\d+,"lastGlobalPosition":\d+,"index":[1-9]\d*,"duplicate":false\}\n$`, `^$`},
		{"ns info json numbers", admin, "", []string{"ns", "info", "default", "-o", "json"}, 0, `"messageCount":\d+,"streamCount":\d+,`, `^$`},
		{"cluster status json numbers", admin, "", []string{"cluster", "status", "-o", "json"}, 0, `^\{"nodeId":"[0-9a-f-]+","leaderId":"[0-9a-f-]+","term":\d+,"commitIndex":\d+,"appliedIndex":\d+,"servers":\[\{.*"appliedIndex":[1-9]\d*,"unreachable":false\}\]\}\n$`, `^$`},
		{"sub info json numbers", admin, "", []string{"sub", "create", "g1", "--stream", "js-1", "-o", "json"}, 0, `"checkpoint":\d+`, `^$`},
		// 12: append-multi takes the API's JSON names too.
		{"append-multi expectedVersion", admin, "", []string{"append-multi", camelFile}, 0, `mc-1\s+0\.\.0`, `^$`},
		{"append-multi expectedVersion conflict", admin, "", []string{"append-multi", camelConflict}, command.ExitConflict, `^$`, `stream "mc-1" is at version 0, expected 7`},
		{"append-multi both spellings", admin, "", []string{"append-multi", bothSpellings}, command.ExitUsage, `^$`, `streams\[0\]: give expectedVersion or expected_version, not both`},
		// 12: reads that stop at their limit say so and how to read on.
		{"read more", admin, "", []string{"read", "nl-1", "--limit", "1"}, 0, `(?s)nl-1\s+0\s+`, `(?m)^-- 1 message shown; more follow: skald read nl-1 --position 1$`},
		{"read more json", admin, "", []string{"read", "nl-1", "--limit", "1", "-o", "json"}, 0, `^\{"messages":\[\{.*"position":0,.*\}\],"next":1\}\n$`, `^$`},
		{"read all of it", admin, "", []string{"read", "nl-1", "--limit", "2", "-o", "json"}, 0, `^\{"messages":\[\{.*\},\{.*\}\]\}\n$`, `^$`},
		{"category more", admin, "", []string{"category", "nl", "--limit", "1"}, 0, `(?s)nl-1\s+0\s+`, `(?m)^-- 1 message shown; more follow: skald category nl --position \d+$`},
		{"all more", admin, "", []string{"all", "--limit", "1", "--prefix", "nl-"}, 0, `(?s)nl-1\s+0\s+`, `(?m)^-- 1 message shown; more follow: skald all --position \d+ --prefix nl-$`},
		{"all more json", admin, "", []string{"all", "--limit", "1", "--prefix", "nl-", "-o", "json"}, 0, `^\{"messages":\[\{.*"position":0,.*\}\],"next":\d+\}\n$`, `^$`},
		{"query more", admin, "", []string{"append", "tg-1", "T", `{}`, "--tag", "x"}, 0, `position 0`, `^$`},
		{"query more 2", admin, "", []string{"append", "tg-1", "T", `{}`, "--tag", "x"}, 0, `position 1`, `^$`},
		{"query stops", admin, "", []string{"query", "--tag", "x", "--limit", "1"}, 0, `(?s)tg-1\s+0\s+`, `(?m)^-- 1 message shown; more follow: skald query --tag x --after \d+$`},
		// 12: errors are JSON under -o json.
		{"error json", admin, "", []string{"ns", "info", "nope", "-o", "json"}, command.ExitNotFound, `^$`, `^\{"error":\{"exitCode":4,"code":"not_found","message":"not_found: namespace not found"\}\}\n$`},
		{"usage error json", admin, "", []string{"read", "-o", "json"}, command.ExitUsage, `^$`, `^\{"error":\{"exitCode":2,"message":"read: wrong number of arguments .*"\}\}\n$`},
		// 15: a missing token says how to give one.
		{"no token", noToken, "", []string{"read", "s-1"}, command.ExitAuth, `^$`, `^skald: unauthenticated: no token: set SKALD_TOKEN or pass --token \(or --token-file\)\n$`},
		{"no token, backup", noToken, "", []string{"backup", "--out", filepath.Join(dir, "b.bak")}, command.ExitAuth, `^$`, `^skald: unauthenticated: no token: set SKALD_TOKEN or pass --token`},
		{"no token, export", noToken, "", []string{"export"}, command.ExitAuth, `^$`, `^skald: unauthenticated: no token: set SKALD_TOKEN or pass --token`},
		// 15: --max-age takes days.
		{"max-age in days", admin, "", []string{"ns", "create", "ret"}, 0, `Created namespace ret`, `^$`},
		{"max-age days", admin, "", []string{"retention", "set", "namespace", "--namespace", "ret", "--max-age", "30d"}, 0, `^Set the policy of namespace: max-age 30d, no count limit\.\n$`, `^$`},
		{"max-age days and hours", admin, "", []string{"retention", "set", "stream", "s-1", "--namespace", "ret", "--max-age", "1d12h"}, 0, `max-age 36h0m0s`, `^$`},
		{"max-age bad", admin, "", []string{"retention", "set", "namespace", "--namespace", "ret", "--max-age", "3w"}, command.ExitUsage, `^$`, `--max-age "3w": want a duration such as 720h, 30d or 1d12h`},
		{"retention list days", admin, "", []string{"retention", "list", "--namespace", "ret"}, 0, `(?m)^namespace\s+30d\s+-`, `^$`},
		// 15: "1 message", not "1 messages".
		{"delete one message", admin, "", []string{"stream", "delete", "ep-1", "--yes"}, 0, `^Deleted ep-1: 1 message removed \(`, `^$`},
		// 15: destructive commands need --yes without a terminal to ask on.
		{"ns delete unconfirmed", admin, "", []string{"ns", "delete", "ret"}, command.ExitUsage, `^$`, `ns delete: deletes namespace ret and its messages: pass --yes to confirm \(no terminal to ask on\)`},
		{"ns delete still there", admin, "", []string{"ns", "info", "ret"}, 0, `ret`, `^$`},
		{"truncate unconfirmed", admin, "", []string{"stream", "truncate", "nl-1", "--before", "1"}, command.ExitUsage, `^$`, `pass --yes`},
		{"ns delete confirmed", admin, "", []string{"ns", "delete", "ret", "--yes"}, 0, `Deleted namespace ret \(0 messages\)`, `^$`},
		// 15: flags that do nothing are not offered.
		{"backup help", admin, "", []string{"backup", "--help"}, 0, `^$`, `(?s)^Usage: skald backup`},
		{"restore help", admin, "", []string{"restore", "--help"}, 0, `^$`, `(?s)^Usage: skald restore`},
		{"export help", admin, "", []string{"export", "--help"}, 0, `^$`, `(?s)^Usage: skald export`},
		{"import help", admin, "", []string{"import", "--help"}, 0, `^$`, `(?s)^Usage: skald import`},
		{"leave help", admin, "", []string{"leave", "--help"}, 0, `^$`, `(?s)^Usage: skald leave`},
	}
	for _, c := range cases {
		out, errOut, code := runCLIStdin(t, c.env, c.stdin, c.args...)
		if code != c.code || !regexp.MustCompile(c.stdout).MatchString(out) || !regexp.MustCompile(c.stderr).MatchString(errOut) {
			t.Errorf("%s: skald %q: exit %d (want %d)\nstdout: %q (want /%s/)\nstderr: %q (want /%s/)", c.name, c.args, code, c.code, out, c.stdout, errOut, c.stderr)
		}
		if strings.HasSuffix(c.name, " help") {
			// Flags that do nothing in the command are not in its help.
			for _, f := range map[string][]string{"backup": {"-o "}, "restore": {"-o ", "-addr", "-token", "-ca "}, "export": {"-o "}, "import": {"-o "}, "leave": {"-o "}}[c.args[0]] {
				if strings.Contains(errOut, "\n  "+f) {
					t.Errorf("%s lists %s, which does nothing there:\n%s", c.name, f, errOut)
				}
			}
		}
	}
	if got, want := storedData(t, p.addr, testAdmin, "nl-1"), []string{`{"a":1}|{"by":"ann"}`, `{"b":2}|`}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("data from a file or stdin is stored as %q, want %q (no trailing newline)", got, want)
	}
}

// TestImportFromStdin: skald import - reads the export from standard
// input, and goes on to the next --addr node when the first is down.
func TestImportFromStdin(t *testing.T) {
	t.Parallel()
	p := startServer(t, "", "--admin-token", testAdmin)
	admin := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	out, errOut, code := runCLI(t, admin, "ns", "create", "dst", "-o", "json")
	var created struct{ Token string }
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil {
		t.Fatalf("ns create: %d %s %s", code, out, errOut)
	}
	for i := range 3 {
		if _, errOut, code := runCLI(t, admin, "append", "imp-1", "T", `{"i":`+string(rune('0'+i))+`}`); code != 0 {
			t.Fatal(errOut)
		}
	}
	export, errOut, code := runCLI(t, admin, "export")
	if code != 0 {
		t.Fatalf("export: %d %s", code, errOut)
	}
	dst := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + created.Token}
	// Through a list of endpoints whose first is down: the export is
	// not lost on it.
	if out, errOut, code := runCLIStdin(t, dst, export, "import", "-", "--addr", "127.0.0.1:1,"+p.addr); code != 0 || !strings.Contains(out, "Imported 3 messages") {
		t.Fatalf("import -: exit %d: %s %s", code, out, errOut)
	}
	if out, _, _ := runCLI(t, dst, "read", "imp-1", "-o", "json"); strings.Count(out, `"type":"T"`) != 3 {
		t.Fatalf("imported stream: %s", out)
	}
}
