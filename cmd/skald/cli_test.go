package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skalddb/skald/cmd/skald/internal/bench"
	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/internal/testutil"
)

// These tests build the skald binary and run it as real processes: a
// server on loopback ports, and the client commands against it.

const testAdmin = "ns_ZGVmYXVsdA_0000000000000000000000000000000000000000000000000000000000000000"

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "skald-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "skald")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("build skald: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type serverProc struct {
	cmd     *exec.Cmd
	addr    string
	dataDir string
	stdout  *syncBuffer
	stderr  *syncBuffer
	done    chan error
}

// syncBuffer is a bytes.Buffer safe to read while a process writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launch starts `skald server` with the arguments args builds for a fresh
// HTTP and Raft address and waits until ready holds. A process that dies
// because another test took one of its ports in between is started again
// on new ports (test binaries run in parallel and share the ports).
func launch(t *testing.T, dataDir string, args func(httpAddr, raftAddr string) []string, ready func(*serverProc) bool) *serverProc {
	t.Helper()
	for attempt := 0; ; attempt++ {
		p := &serverProc{addr: testutil.FreeAddr(t), dataDir: dataDir, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
		p.cmd = exec.Command(binary, append([]string{"server", "--data-dir", dataDir}, args(p.addr, testutil.FreeAddr(t))...)...)
		p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.done <- p.cmd.Wait() }()
		if waitReady(t, p, ready, attempt < 10) {
			t.Cleanup(func() {
				p.cmd.Process.Kill()
				<-p.done
			})
			return p
		}
	}
}

// waitReady waits until ready(p) holds; it returns false (retry) when the
// process died of a port clash and retrying is allowed. A process that
// never gets ready is killed when the test ends.
func waitReady(t *testing.T, p *serverProc, ready func(*serverProc) bool, mayRetry bool) bool {
	t.Helper()
	settled := false // ready, or exited
	t.Cleanup(func() {
		if !settled {
			p.cmd.Process.Kill()
		}
	})
	var exited bool
	var exitErr error
	testutil.Until(t, 30*time.Second, "the server to be ready", func() (bool, string) {
		if ready(p) {
			return true, ""
		}
		select {
		case exitErr = <-p.done:
			exited = true
			return true, ""
		default:
			return false, p.stderr.String()
		}
	})
	settled = true
	if !exited {
		return true
	}
	if mayRetry && strings.Contains(p.stderr.String(), "address already in use") {
		return false
	}
	t.Fatalf("server exited (%v): %s", exitErr, p.stderr)
	return false
}

// startServer runs `skald server` with a fresh data directory (or dataDir)
// and waits until it is ready (and, with extra flags, until the admin
// token works).
func startServer(t *testing.T, dataDir string, extra ...string) *serverProc {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	return launch(t, dataDir, func(httpAddr, raftAddr string) []string {
		return append([]string{"--http-addr", httpAddr, "--raft-addr", raftAddr, "--log-level", "warn"}, extra...)
	}, func(p *serverProc) bool {
		resp, err := http.Get("http://" + p.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200 && (len(extra) == 0 || p.admin(t))
	})
}

// admin reports whether the admin token works yet.
func (p *serverProc) admin(t *testing.T) bool {
	_, _, code := runCLI(t, []string{"SKALD_TOKEN=" + testAdmin}, "ns", "list", "--addr", p.addr)
	return code == 0
}

func runCLI(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
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

func TestCLI(t *testing.T) {
	p := startServer(t, "", "--admin-token", testAdmin)
	admin := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	out, _, code := runCLI(t, admin, "ns", "create", "shop", "--description", "the shop", "-o", "json")
	if code != 0 {
		t.Fatalf("ns create exit %d", code)
	}
	var created struct{ Token string }
	if err := json.Unmarshal([]byte(out), &created); err != nil || !strings.HasPrefix(created.Token, "ns_c2hvcA_") {
		t.Fatalf("ns create json %q: %v", out, err)
	}
	shop := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + created.Token}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	multiFile := write("multi.json", `{"streams":[
		{"stream":"mm-1","expected_version":-1,"messages":[
			{"type":"A","data":{"n":1},"id":"0192f0c4-0000-7000-8000-0000000000b1"},
			{"type":"B","data":{"n":2},"metadata":{"by":"ann"},"id":"0192f0c4-0000-7000-8000-0000000000b2"}]},
		{"stream":"mm-2","messages":[{"type":"C","data":{},"id":"0192f0c4-0000-7000-8000-0000000000b3"}]}]}`)
	multiConflictFile := write("conflict.json", `{"streams":[
		{"stream":"mm-1","expected_version":5,"messages":[{"type":"A","data":{}}]},
		{"stream":"mm-2","expected_version":0,"messages":[{"type":"A","data":{}}]},
		{"stream":"mm-3","expected_version":0,"messages":[{"type":"A","data":{}}]}]}`)
	multiBadFile := write("bad.json", `{"strems":[]}`)
	adminTokenFile := write("admin-token", testAdmin+"\n")
	noToken := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN="}
	cases := []struct {
		name     string
		env      []string
		args     []string
		code     int
		stdout   string // regexp
		stderrRe string
	}{
		{"append", shop, []string{"append", "account-1", "Opened", `{"owner":"ann"}`}, 0, `position 0 \(global position 1`, ""},
		{"append with flag after arguments", shop, []string{"append", "account-1", "Deposited", `{"n":5}`, "--expected-version", "0"}, 0, `position 1 \(global position 2`, ""},
		{"version conflict", shop, []string{"append", "account-1", "Deposited", `{}`, "--expected-version", "0"}, command.ExitConflict, `^$`, `aborted: stream "account-1" is at version 1`},
		{"bad data", shop, []string{"append", "account-1", "T", `[1]`}, command.ExitUsage, `^$`, `^skald: invalid_argument: messages\[0\]\.data: must be a JSON object\n$`},
		{"malformed data", shop, []string{"append", "account-1", "T", `{bad`}, command.ExitUsage, `^$`, `^skald: data: invalid JSON: invalid character 'b' looking for beginning of object key string\n$`},
		{"malformed metadata", shop, []string{"append", "account-1", "T", `{}`, "--metadata", `{"a":}`}, command.ExitUsage, `^$`, `^skald: --metadata: invalid JSON: invalid character '}'`},
		{"data file missing", shop, []string{"append", "account-1", "T", "@/nonexistent/x.json"}, command.ExitUsage, `^$`, `^skald: data: open /nonexistent/x.json: no such file or directory\n$`},
		{"unknown flag", shop, []string{"append", "account-1", "T", `{}`, "--nope"}, command.ExitUsage, `^$`, `^skald: append: flag provided but not defined: -nope \(usage: skald append STREAM .*; see 'skald append --help'\)\n$`},
		{"help shows the effective address", []string{"SKALD_ADDR=10.9.9.9:1"}, []string{"append", "--help"}, 0, `^$`, `(?s)-addr string\n\s+node address.*\(default "10\.9\.9\.9:1"\).*-expected-version N\n\s+append only if the stream is at version N \(-1: the stream has no message; default: any version\)\n`},
		{"read table", shop, []string{"read", "account-1"}, 0, `(?s)STREAM\s+POS\s+GPOS.*account-1\s+0\s+1\s+Opened.*account-1\s+1\s+2\s+Deposited`, ""},
		{"read json", shop, []string{"read", "account-1", "-o", "json"}, 0, `"data":\{"owner":"ann"\}`, ""},
		{"category with group", shop, []string{"category", "account", "--member", "0", "--size", "1"}, 0, `account-1\s+1\s+2\s+Deposited`, ""},
		// Direction and last N (issue 29): account-1 holds Opened (gp 1), Deposited (gp 2).
		{"read backward", shop, []string{"read", "account-1", "--backward"}, 0, `(?s)^STREAM[^\n]*\naccount-1\s+1\s+2\s+Deposited[^\n]*\naccount-1\s+0\s+1\s+Opened[^\n]*\n$`, ""},
		{"read backward from a position", shop, []string{"read", "account-1", "--backward", "--position", "0"}, 0, `(?s)^STREAM[^\n]*\naccount-1\s+0\s+1\s+Opened[^\n]*\n$`, ""},
		{"read last 1", shop, []string{"read", "account-1", "--last", "1"}, 0, `(?s)^STREAM[^\n]*\naccount-1\s+1\s+2\s+Deposited[^\n]*\n$`, ""},
		{"category last 2, oldest first", shop, []string{"category", "account", "--last", "2"}, 0, `(?s)^STREAM[^\n]*\naccount-1\s+0\s+1\s+Opened[^\n]*\naccount-1\s+1\s+2\s+Deposited[^\n]*\n$`, ""},
		{"category last 1 backward json", shop, []string{"category", "account", "--last", "1", "--backward", "-o", "json"}, 0, `^\{"messages":\[\{[^\]]*"globalPosition":2[,}][^\]]*\]\}\n$`, ""},
		{"last and limit", shop, []string{"read", "account-1", "--last", "1", "--limit", "5"}, command.ExitUsage, `^$`, `^skald: read: --last and --limit: give one \(usage: skald read STREAM`},
		{"last 0", shop, []string{"category", "account", "--last", "0"}, command.ExitUsage, `^$`, `^skald: category: --last 0: want 1 or more`},
		{"all last 1", shop, []string{"all", "--last", "1"}, 0, `(?s)^STREAM[^\n]*\naccount-1\s+1\s+2\s+Deposited[^\n]*\n$`, ""},
		{"all of a type (untagged)", shop, []string{"all", "--type", "Opened"}, 0, `(?s)^STREAM[^\n]*\naccount-1\s+0\s+1\s+Opened[^\n]*\n$`, ""},
		{"all of a prefix, backward", shop, []string{"all", "--prefix", "account-", "--backward"}, 0, `(?s)^STREAM[^\n]*\naccount-1\s+1\s+2\s+Deposited[^\n]*\naccount-1\s+0\s+1\s+Opened[^\n]*\n$`, ""},
		{"category of another prefix", shop, []string{"category", "account", "--prefix", "account-2"}, 0, `^STREAM[^\n]*\n$`, ""},
		{"category after a state vector", shop, []string{"category", "account", "--held", "account-1=0"}, 0, `(?s)^STREAM[^\n]*\naccount-1\s+1\s+2\s+Deposited[^\n]*\n$`, ""},
		{"category after a bad state vector", shop, []string{"category", "account", "--held", "account-1"}, command.ExitUsage, `^$`, `^skald: category: --held "account-1": want STREAM=POS`},
		{"category after a state vector of another category", shop, []string{"category", "account", "--held", "order-1=0"}, command.ExitUsage, `^$`, `invalid_argument: state_vector\["order-1"\]: stream "order-1" is not of category "account"`},
		{"category of a bad type", shop, []string{"category", "account", "--type", ""}, command.ExitUsage, `^$`, `invalid_argument: types\[0\]: must not be empty`},
		{"ns info own", shop, []string{"ns", "info", "shop"}, 0, `shop\s+2\s+1`, ""},
		{"ns list needs admin", shop, []string{"ns", "list"}, command.ExitAuth, `^$`, `permission_denied`},
		{"no token", []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN="}, []string{"read", "s"}, command.ExitAuth, `^$`, `unauthenticated`},
		{"ns info missing", admin, []string{"ns", "info", "nope"}, command.ExitNotFound, `^$`, `not_found`},
		{"cluster status", admin, []string{"cluster", "status"}, 0, `(?s)leader .*ROLE.*leader\s+voter`, ""},
		{"usage error", admin, []string{"read"}, command.ExitUsage, `^$`, `^skald: read: wrong number of arguments \(usage: skald read STREAM .*; see 'skald read --help'\)\n$`},
		{"unknown command", admin, []string{"frobnicate"}, command.ExitUsage, `^$`, `unknown command`},
		{"help", admin, []string{"append", "--help"}, 0, `^$`, `Usage: skald append STREAM TYPE DATA-JSON`},
		{"unreachable", []string{"SKALD_ADDR=127.0.0.1:1", "SKALD_TOKEN=" + testAdmin}, []string{"ns", "list"}, command.ExitUnreachable, `^$`, `unreachable: no answer from 127\.0\.0\.1:1 .*connection refused`},
		{"ns delete", admin, []string{"ns", "delete", "shop", "--yes"}, 0, `Deleted namespace shop \(2 messages\)`, ""},
		// -o json prints the API's reply message, every field.
		{"append json", admin, []string{"append", "json-1", "T", `{}`, "-o", "json"}, 0, `^\{"firstPosition":0, ?"lastPosition":0, ?"firstGlobalPosition":\d+, ?"lastGlobalPosition":\d+, ?"index":[1-9]\d*, ?"duplicate":false\}\n$`, ""},
		{"ns create json", admin, []string{"ns", "create", "tmp", "-o", "json"}, 0, `^\{"name":"tmp", ?"token":"ns_dG1w_[0-9a-f]{64}", ?"createdAt":"[0-9-]+T[0-9:.]+Z", ?"index":[1-9]\d*\}\n$`, ""},
		{"ns info json", admin, []string{"ns", "info", "tmp", "-o", "json"}, 0, `^\{"name":"tmp", ?"description":"", ?"createdAt":"[0-9-]+T[0-9:.]+Z", ?"messageCount":0, ?"streamCount":0, ?"lastActivity":null, ?"dedupeWindow":"120s", ?"dedupeForever":false\}\n$`, ""},
		{"ns delete json", admin, []string{"ns", "delete", "tmp", "-o", "json", "--yes"}, 0, `^\{"name":"tmp", ?"deletedAt":"[0-9-]+T[0-9:.]+Z", ?"messagesDeleted":0, ?"index":[1-9]\d*\}\n$`, ""},
		{"cluster status json", admin, []string{"cluster", "status", "-o", "json"}, 0, `^\{"nodeId":"([0-9a-f-]+)", ?"leaderId":"[0-9a-f-]+", ?"term":\d+, ?"commitIndex":\d+, ?"appliedIndex":\d+, ?"servers":\[\{"id":"[0-9a-f-]+", ?"name":"[^"]+", ?"raftAddress":"127\.0\.0\.1:\d+", ?"apiAddress":"127\.0\.0\.1:\d+", ?"suffrage":"SUFFRAGE_VOTER", ?"healthy":true, ?"lastContact":"0s", ?"appliedIndex":[1-9]\d*, ?"unreachable":false\}\]\}\n$`, ""},
		{"transfer to an unknown server", admin, []string{"cluster", "transfer-leadership", "--to", "nosuch"}, command.ExitNotFound, `^$`, `not_found: to_id: no server "nosuch" in the cluster`},
		{"token from a file", noToken, []string{"ns", "list", "--token-file", adminTokenFile}, 0, `(?s)NAME.*default`, ""},
		{"token file from the environment", append(noToken, "SKALD_TOKEN_FILE="+adminTokenFile), []string{"ns", "list"}, 0, `(?s)NAME.*default`, ""},
		{"token and token file", admin, []string{"ns", "list", "--token-file", adminTokenFile}, command.ExitUsage, `^$`, `^skald: --token \(or SKALD_TOKEN\) and --token-file \(or SKALD_TOKEN_FILE\) are both set: give the secret one way\n$`},
		{"token file missing", noToken, []string{"ns", "list", "--token-file", filepath.Join(dir, "nope")}, command.ExitUsage, `^$`, `^skald: --token-file: open .*/nope: no such file or directory\n$`},
		{"remove an unknown server", admin, []string{"cluster", "remove", "nosuch", "--yes"}, command.ExitNotFound, `^$`, `^skald: not_found: id: no server "nosuch" in the cluster`},
		{"ns create dedupe window too short", admin, []string{"ns", "create", "dd1", "--dedupe-window", "500ms"}, command.ExitUsage, `^$`, `invalid_argument: dedupe_window: must be 0 \(off\) or at least 1s, got 500ms`},
		{"ns create bad dedupe window", admin, []string{"ns", "create", "dd1", "--dedupe-window", "soon"}, command.ExitUsage, `^$`, `--dedupe-window "soon": want a duration \(2m, 1h\), off or forever`},
		{"ns create dedupe forever", admin, []string{"ns", "create", "dd2", "--dedupe-window", "forever"}, 0, `Created namespace dd2`, ""},
		{"ns info dedupe", admin, []string{"ns", "info", "dd2"}, 0, `(?s)DEDUPE WINDOW\n.*dd2.*forever\n`, ""},
		// Retention policies (issue #20), on dd2 through the admin token.
		{"retention set stream", admin, []string{"retention", "set", "stream", "dd-9", "--max-count", "2", "--namespace", "dd2"}, 0, `^Set the policy of stream dd-9: no age limit, max-count 2\.\n$`, ""},
		{"retention set category", admin, []string{"retention", "set", "category", "dd", "--max-age", "720h", "--namespace", "dd2"}, 0, `^Set the policy of category dd: max-age 30d, no count limit\.\n$`, ""},
		{"retention list", admin, []string{"retention", "list", "--namespace", "dd2"}, 0, `(?s)^SCOPE\s+NAME\s+MAX-AGE\s+MAX-COUNT\ncategory\s+dd\s+30d\s+-\s*\nstream\s+dd-9\s+-\s+2\s*\n$`, ""},
		{"retention list json", admin, []string{"retention", "list", "--namespace", "dd2", "-o", "json"}, 0, `^\{"policies":\[\{"scope":"RETENTION_SCOPE_CATEGORY", ?"name":"dd", ?"maxAge":"2592000s", ?"maxCount":0\}, ?\{"scope":"RETENTION_SCOPE_STREAM", ?"name":"dd-9", ?"maxAge":null, ?"maxCount":2\}\], ?"appliedIndex":0\}\n$`, ""},
		{"retention negative count", admin, []string{"retention", "set", "namespace", "--max-count", "-1", "--namespace", "dd2"}, command.ExitUsage, `^$`, `invalid_argument: policy\.max_count: must be 0 \(no limit\) or more, got -1`},
		{"retention on the reserved namespace", admin, []string{"retention", "set", "namespace", "--max-age", "1h"}, command.ExitUsage, `^$`, `invalid_argument: namespace: the "default" namespace holds the admin token and takes no retention policy`},
		{"retention on an unknown namespace", admin, []string{"retention", "set", "namespace", "--max-age", "1h", "--namespace", "nope"}, command.ExitNotFound, `^$`, `not_found`},
		{"retention scope without a name", admin, []string{"retention", "set", "stream", "--max-count", "1", "--namespace", "dd2"}, command.ExitUsage, `^$`, `the stream scope needs a name`},
		{"retention set without limits", admin, []string{"retention", "set", "stream", "dd-9", "--namespace", "dd2"}, command.ExitUsage, `^$`, `give --max-age or --max-count`},
		{"retention clear", admin, []string{"retention", "clear", "stream", "dd-9", "--namespace", "dd2"}, 0, `^Removed the policy of stream dd-9\.\n$`, ""},
		{"retention clear again", admin, []string{"retention", "clear", "stream", "dd-9", "--namespace", "dd2"}, 0, `^stream dd-9 had no policy\.\n$`, ""},
		{"retention help", admin, []string{"retention", "--help"}, 0, `(?s)Usage: skald retention <set\|list\|clear>.*--retention-interval`, ""},
		{"ns create dedupe help", admin, []string{"ns", "create", "--help"}, 0, `^$`, `-dedupe-window string\n\s+idempotent writes`},
		{"append with id", admin, []string{"append", "dd-1", "T", `{}`, "--id", "0192f0c4-0000-7000-8000-0000000000c1"}, 0, `Appended to dd-1 at position 0`, ""},
		{"append retried with the same id", admin, []string{"append", "dd-1", "T", `{}`, "--id", "0192f0c4-0000-7000-8000-0000000000c1"}, 0, `Already appended to dd-1 at position 0 \(global position \d+\): the id was written before; nothing written`, ""},
		{"append-multi", admin, []string{"append-multi", multiFile}, 0, `(?s)STREAM\s+POSITIONS\s+GLOBAL POSITIONS\n\s*mm-1\s+0\.\.1\s+\d+\.\.\d+\n\s*mm-2\s+0\.\.0`, ""},
		{"append-multi again", admin, []string{"append-multi", multiFile}, 0, `^Already appended`, ""},
		{"append-multi conflict", admin, []string{"append-multi", multiConflictFile}, command.ExitConflict, `^$`, `aborted: expected versions do not match: stream "mm-1" is at version 1, expected 5; stream "mm-3" is at version -1, expected 0`},
		{"append-multi unknown field", admin, []string{"append-multi", multiBadFile}, command.ExitUsage, `^$`, `invalid JSON: json: unknown field "strems"`},
		{"append-multi help", admin, []string{"append-multi", "--help"}, 0, `^$`, `(?s)Usage: skald append-multi FILE\|-.*Limits: 1\.\.100 streams`},
		{"append same id other data", admin, []string{"append", "dd-1", "T", `{"x":1}`, "--id", "0192f0c4-0000-7000-8000-0000000000c1"}, command.ExitConflict, `^$`, `already_exists: messages\[0\]\.id 0192f0c4-0000-7000-8000-0000000000c1 was already written to stream "dd-1" at position 0`},
		// Removals (issue #20), in order on the default namespace.
		{"stream append 0", admin, []string{"append", "rt-1", "T", `{}`}, 0, `position 0`, ""},
		{"stream append 1", admin, []string{"append", "rt-1", "T", `{}`}, 0, `position 1`, ""},
		{"stream append 2", admin, []string{"append", "rt-1", "T", `{}`}, 0, `position 2`, ""},
		{"stream truncate", admin, []string{"stream", "truncate", "rt-1", "--before", "2", "--yes"}, 0, `^Truncated rt-1 before position 2: 2 messages removed \(version 2, index [1-9]\d*\)\.\n$`, ""},
		{"stream truncate json", admin, []string{"stream", "truncate", "rt-1", "--before", "2", "-o", "json", "--yes"}, 0, `^\{"messagesDeleted":0, ?"version":2, ?"index":[1-9]\d*\}\n$`, ""},
		{"stream read after truncate", admin, []string{"read", "rt-1", "-o", "json"}, 0, `^\{"messages":\[\{[^]]*"position":2,[^]]*\}\]\}\n$`, ""},
		{"stream truncate beyond the version", admin, []string{"stream", "truncate", "rt-1", "--before", "4", "--yes"}, command.ExitUsage, `^$`, `invalid_argument: before: must be at most the stream's version \+ 1 \(3\), got 4`},
		{"stream truncate without --before", admin, []string{"stream", "truncate", "rt-1"}, command.ExitUsage, `^$`, `stream truncate: --before is required`},
		{"stream truncate never written", admin, []string{"stream", "truncate", "rt-9", "--before", "1", "--yes"}, command.ExitNotFound, `^$`, `not_found: stream not found`},
		{"stream delete at the wrong version", admin, []string{"stream", "delete", "rt-1", "--expected-version", "0", "--yes"}, command.ExitConflict, `^$`, `aborted: stream "rt-1" is at version 2, expected 0`},
		{"stream delete", admin, []string{"stream", "delete", "rt-1", "--expected-version", "2", "--yes"}, 0, `^Deleted rt-1: 1 message removed \(version 2, index [1-9]\d*\)\.\n$`, ""},
		{"stream append after delete", admin, []string{"append", "rt-1", "T", `{}`}, 0, `position 3`, ""},
		{"stream hard delete json", admin, []string{"stream", "delete", "rt-1", "--hard", "-o", "json", "--yes"}, 0, `^\{"messagesDeleted":1, ?"version":3, ?"index":[1-9]\d*\}\n$`, ""},
		{"stream append to a tombstone", admin, []string{"append", "rt-1", "T", `{}`}, command.ExitConflict, `^$`, `failed_precondition: the stream was hard-deleted`},
		{"stream truncate a tombstone", admin, []string{"stream", "truncate", "rt-1", "--before", "1", "--yes"}, command.ExitConflict, `^$`, `failed_precondition: the stream was hard-deleted`},
		{"stream delete never written", admin, []string{"stream", "delete", "rt-9", "--yes"}, command.ExitNotFound, `^$`, `not_found: stream not found`},
		{"stream watermark append 0", admin, []string{"append", "wm-1", "A", `{}`}, 0, `position 0`, ""},
		{"stream watermark append 1", admin, []string{"append", "wm-1", "B", `{}`}, 0, `position 1`, ""},
		{"stream watermark append 2", admin, []string{"append", "wm-2", "A", `{}`}, 0, `position 0`, ""},
		{"stream delete-by-watermark by type", admin, []string{"stream", "delete-by-watermark", "wm", "wm-1=5", "--type", "B", "-o", "json", "--yes"}, 0, `^\{"messagesDeleted":1, ?"streams":1, ?"index":[1-9]\d*\}\n$`, ""},
		{"stream delete-by-watermark", admin, []string{"stream", "delete-by-watermark", "wm", "wm-1=0", "wm-2=7", "--yes"}, 0, `^Deleted 2 messages from 2 streams of wm \(index [1-9]\d*\)\.\n$`, ""},
		{"stream delete-by-watermark bad pair", admin, []string{"stream", "delete-by-watermark", "wm", "wm-1"}, command.ExitUsage, `^$`, `"wm-1": want STREAM=POS`},
		{"stream delete-by-watermark other category", admin, []string{"stream", "delete-by-watermark", "wm", "xx-1=0", "--yes"}, command.ExitUsage, `^$`, `invalid_argument: watermarks\[0\]\.stream: "xx-1" is not in category "wm"`},
		{"stream unknown subcommand", admin, []string{"stream", "shred", "x"}, command.ExitUsage, `^$`, `stream: unknown subcommand "shred"`},
		{"stream help", admin, []string{"stream", "--help"}, 0, `(?s)skald stream delete STREAM \[--hard\].*delete-by-watermark CATEGORY STREAM=POS`, ""},
		// Tags, query and conditional appends (issue #18), in order on the default namespace.
		{"dcb append tagged", admin, []string{"append", "course-c1", "Defined", `{}`, "--tag", "course:c1"}, 0, `position 0`, ""},
		{"dcb append two tags", admin, []string{"append", "course-c1", "Subscribed", `{}`, "--tag", "course:c1", "--tag", "student:s1"}, 0, `position 1`, ""},
		{"dcb query by tag", admin, []string{"query", "--tag", "course:c1"}, 0, `(?s)TAGS\s+DATA\n.*course-c1\s+0\s+\d+\s+Defined\s+\S+\s+course:c1\s+\{\}\n.*course:c1,student:s1`, ""},
		{"dcb query type and tags json", admin, []string{"query", "--type", "Subscribed", "--tag", "course:c1", "--tag", "student:s1", "-o", "json"}, 0, `^\{"messages":\[\{[^]]*"type":"Subscribed"[^]]*"tags":\["course:c1","student:s1"\]\}\]\}\n$`, ""},
		{"dcb query json file", admin, []string{"query", "--query", `{"items":[{"types":["Defined"]},{"tags":["student:s1"]}]}`, "-o", "json"}, 0, `^\{"messages":\[\{"id".*"type":"Defined".*\},\{"id".*"type":"Subscribed".*\}\]\}\n$`, ""},
		{"dcb query nothing", admin, []string{"query"}, command.ExitUsage, `^$`, `give --type, --tag or --query`},
		{"dcb query after the head", admin, []string{"query", "--tag", "course:c1", "--after", "1000000", "-o", "json"}, 0, `^\{"messages":\[\]\}\n$`, ""},
		{"dcb conditional append fails", admin, []string{"append", "course-c1", "Subscribed", `{}`, "--tag", "student:s2", "--fail-if-tag", "course:c1"}, command.ExitConflict, `^$`, `failed_precondition: append condition failed: message at global position \d+ matches the query and is after 0`},
		{"dcb conditional append in the future", admin, []string{"append", "course-c1", "Subscribed", `{}`, "--fail-if-tag", "course:c1", "--after", "1000000"}, command.ExitUsage, `^$`, `invalid_argument: condition.after: is past the namespace's last global position \d+, got 1000000`},
		{"dcb conditional append passes", admin, []string{"append", "course-c1", "Renamed", `{}`, "--fail-if-type", "Renamed", "--fail-if-tag", "course:c1"}, 0, `position 2`, ""},
		{"dcb after without a condition", admin, []string{"append", "course-c1", "T", `{}`, "--after", "3"}, command.ExitUsage, `^$`, `--after is the position of a condition`},
		{"dcb repeated tag", admin, []string{"append", "course-c1", "T", `{}`, "--tag", "a", "--tag", "a"}, command.ExitUsage, `^$`, `invalid_argument: messages\[0\]\.tags\[1\]: repeats messages\[0\]\.tags\[0\] "a"`},
		{"server commit timeout out of range", nil, []string{"server", "--raft-commit-timeout", "0s"}, command.ExitUsage, `^$`, `--raft-commit-timeout must be between 1ms and 1s, got 0s`},
		{"server negative compress threshold", nil, []string{"server", "--compress-min-bytes", "-1"}, command.ExitUsage, `^$`, `--compress-min-bytes must not be negative, got -1`},
		{"server compress flag in help", nil, []string{"server", "--help"}, 0, `^$`, `-compress-min-bytes int`},
		{"server disk alarm flag in help", nil, []string{"server", "--help"}, 0, `^$`, `-min-free-disk uint\n\s+the leader refuses writes`},
		{"server unknown log store", nil, []string{"server", "--raft-log-store", "rocks"}, command.ExitUsage, `^$`, `--raft-log-store "rocks": want bolt or wal`},
		{"restore unknown log store", nil, []string{"restore", "--from", "x", "--data-dir", "y", "--raft-log-store", "rocks"}, command.ExitUsage, `^$`, `--raft-log-store "rocks": want bolt or wal`},
		{"server memtable too small", nil, []string{"server", "--memtable-bytes", "1000"}, command.ExitUsage, `^$`, `--memtable-bytes must be between 1 MiB and 1 GiB, got 1000`},
		{"server cache too small", nil, []string{"server", "--cache-bytes", "0"}, command.ExitUsage, `^$`, `--cache-bytes must be between 1 MiB and 1 TiB, got 0`},
		{"server no open namespaces", nil, []string{"server", "--max-open-namespaces", "0"}, command.ExitUsage, `^$`, `--max-open-namespaces must be at least 1, got 0`},
		{"server negative namespace limit", nil, []string{"server", "--max-namespaces", "-1"}, command.ExitUsage, `^$`, `--max-namespaces must be 0 \(no limit\) or more, got -1`},
		{"server namespace limit in help", nil, []string{"server", "--help"}, 0, `^$`, `-max-namespaces int\n\s+most namespaces the cluster holds`},
		{"server group limit of 0", nil, []string{"server", "--max-groups-per-namespace", "0"}, command.ExitUsage, `^$`, `--max-groups-per-namespace must be 1 or more, or -1 \(no limit\), got 0`},
		{"server credential limit below -1", nil, []string{"server", "--max-credentials-per-namespace", "-2"}, command.ExitUsage, `^$`, `--max-credentials-per-namespace must be 1 or more, or -1 \(no limit\), got -2`},
		{"server storage flags in help", nil, []string{"server", "--help"}, 0, `^$`, `-memtable-bytes uint\s+largest Pebble memtable of one namespace.*\(default 67108864\)`},
		{"probe ready", nil, []string{"probe", "http://" + p.addr + "/readyz"}, 0, `^$`, ""},
		{"probe missing", nil, []string{"probe", "http://" + p.addr + "/nothing"}, command.ExitUnavailable, `^$`, `404`},
	}
	// Payloads over the argument size limit (128 KiB) come from a file
	// or standard input.
	big := `{"blob":"` + strings.Repeat("x", 200<<10) + `"}`
	file := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(file, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, admin, "append", "big-1", "T", "@"+file); code != 0 {
		t.Fatalf("append @file: exit %d: %s", code, errOut)
	}
	stdin := exec.Command(binary, "append", "big-1", "T", "-", "--expected-version", "0")
	stdin.Env, stdin.Stdin = append(os.Environ(), admin...), strings.NewReader(big)
	if out, err := stdin.CombinedOutput(); err != nil {
		t.Fatalf("append from stdin: %v: %s", err, out)
	}
	if out, errOut, code := runCLI(t, admin, "read", "big-1", "-o", "json"); code != 0 || strings.Count(out, strings.Repeat("x", 200<<10)) != 2 {
		t.Fatalf("read big-1: exit %d, %d bytes, %s", code, len(out), errOut)
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

func TestServerFirstStartPrintsTokenAndRestarts(t *testing.T) {
	dir := t.TempDir()
	p := startServer(t, dir)
	var token string
	tokenLine := regexp.MustCompile(`Admin token \(shown only now; keep it\): (ns_ZGVmYXVsdA_[0-9a-f]{64})`)
	testutil.Until(t, 30*time.Second, "the admin token", func() (bool, string) {
		if m := tokenLine.FindStringSubmatch(p.stdout.String()); m != nil {
			token = m[1]
			return true, ""
		}
		return false, fmt.Sprintf("%q %s", p.stdout, p.stderr)
	})
	env := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + token}
	if _, errOut, code := runCLI(t, env, "append", "s-1", "T", `{"k":1}`); code != 0 {
		t.Fatalf("append: %d %s", code, errOut)
	}
	// SIGTERM: a clean, prompt exit.
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("server exited with %v: %s", err, p.stderr)
		}
		p.done <- nil // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("server did not stop on SIGTERM")
	}
	// Restart on the same data: no new token, the old one and the data stay.
	q := startServer(t, dir)
	env[0] = "SKALD_ADDR=" + q.addr
	var out string
	testutil.Until(t, 30*time.Second, "a read after the restart", func() (bool, string) {
		var errOut string
		var code int
		out, errOut, code = runCLI(t, env, "read", "s-1", "-o", "json")
		return code == 0, fmt.Sprintf("exit %d: %s", code, errOut)
	})
	if !strings.Contains(out, `"data":{"k":1}`) {
		t.Fatalf("after restart: %s", out)
	}
	if strings.Contains(q.stdout.String(), "Admin token") {
		t.Fatal("a restart printed a new admin token")
	}
}

// TestExportImportRoundTrip: export then import into another namespace
// keeps every message whole: ids, positions, global positions, times,
// data, metadata and tags, and the tags' DCB index (export used to drop
// tags, so a tag query found nothing in the copy).
func TestExportImportRoundTrip(t *testing.T) {
	p := startServer(t, "", "--admin-token", testAdmin)
	admin := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	tokens := map[string]string{}
	for _, ns := range []string{"src", "dst"} {
		out, errOut, code := runCLI(t, admin, "ns", "create", ns, "-o", "json")
		var c struct{ Token string }
		if code != 0 || json.Unmarshal([]byte(out), &c) != nil {
			t.Fatalf("ns create %s: %d %s", ns, code, errOut)
		}
		tokens[ns] = c.Token
	}
	src := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + tokens["src"]}
	dst := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + tokens["dst"]}
	for i := 0; i < 25; i++ {
		args := []string{"append", fmt.Sprintf("order-%d", i%4), "Placed", fmt.Sprintf(`{"n":%d,"price":1.50,"name":"ünï"}`, i)}
		if i%3 == 0 {
			args = append(args, "--metadata", `{"correlationStreamName":"flow-1"}`)
		}
		if i%2 == 0 {
			args = append(args, "--tag", fmt.Sprintf("course:c%d", i%3), "--tag", "student:s1")
		}
		if _, errOut, code := runCLI(t, src, args...); code != 0 {
			t.Fatalf("append: %s", errOut)
		}
	}
	file := filepath.Join(t.TempDir(), "export.ndjson.gz")
	if _, errOut, code := runCLI(t, src, "export", "--gzip", "--out", file); code != 0 || !strings.Contains(errOut, "exported 25 messages") {
		t.Fatalf("export: %d %s", code, errOut)
	}
	// Said once, on stdout: the progress lines are for a terminal.
	if out, errOut, code := runCLI(t, dst, "import", file); code != 0 || !strings.Contains(out, "Imported 25 messages") || errOut != "" {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	a, _, _ := runCLI(t, src, "category", "order", "-o", "json", "--limit", "-1")
	b, _, _ := runCLI(t, dst, "category", "order", "-o", "json", "--limit", "-1")
	if a != b || !strings.Contains(a, `"metadata":{"correlationStreamName":"flow-1"}`) || strings.Count(a, `"id"`) != 25 {
		t.Fatalf("round trip differs:\n%s\n%s", a, b)
	}
	// Tags and their index: the same tag queries find the same messages
	// (ids, positions, times, tags) in the copy.
	for _, q := range [][]string{{"--tag", "course:c1"}, {"--tag", "student:s1"}, {"--type", "Placed", "--tag", "course:c0", "--tag", "student:s1"}} {
		args := append([]string{"query", "-o", "json"}, q...)
		a, errA, codeA := runCLI(t, src, args...)
		b, errB, codeB := runCLI(t, dst, args...)
		if codeA != 0 || codeB != 0 || a != b || !strings.Contains(a, `"tags":["course:c`) {
			t.Fatalf("query %v differs after the round trip:\n%s%s\n%s%s", q, a, errA, b, errB)
		}
	}
	// Importing the same file again clashes, naming the line and the
	// record's stream, in the words of the CLI (no record index of a
	// chunk, no package prefix).
	if _, errOut, code := runCLI(t, dst, "import", file); code != command.ExitConflict ||
		!strings.Contains(errOut, `import stopped at line 1: POSITION_EXISTS: stream "order-0" position 0, global position 1: `) ||
		!strings.Contains(errOut, "(0 messages before it imported)") ||
		strings.Contains(errOut, "record 0") || strings.Contains(errOut, "fsm:") || strings.Contains(errOut, "chunk") {
		t.Fatalf("second import: %d %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, src, "export", "--ns", "dst"); code != command.ExitUsage || !strings.Contains(errOut, "use dst's token") {
		t.Fatalf("export of another namespace: %d %s", code, errOut)
	}
}

// freeBlock finds a base port with n*10 free ports above it.
func freeBlock(t *testing.T, n int) int {
	t.Helper()
	for base := 20000 + os.Getpid()%20000; base < 60000; base += 97 {
		ok := true
		var ls []net.Listener
		for p := base; p < base+10*n && ok; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port block")
	return 0
}

// startDev runs skald dev with --base-port base and args, waits for
// "cluster ready", and stops it on interrupt when the test ends (it must
// exit cleanly within 30 s).
func startDev(t *testing.T, base int, args ...string) *syncBuffer {
	t.Helper()
	out, _ := startDevCmd(t, base, args...)
	return out
}

// startDevCmd is startDev that also returns the dev process.
func startDevCmd(t *testing.T, base int, args ...string) (*syncBuffer, *exec.Cmd) {
	t.Helper()
	out := &syncBuffer{}
	// The KurrentDB ports sit inside the free block too (base+3+10i).
	cmd := exec.Command(binary, append([]string{"dev", "--base-port", strconv.Itoa(base),
		"--kurrentdb-port", strconv.Itoa(base + 3)}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("dev exited with %v: %s", err, out)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Error("dev did not stop on interrupt")
		}
	})
	testutil.Until(t, 60*time.Second, "cluster ready", func() (bool, string) {
		return strings.Contains(out.String(), "cluster ready"), out.String()
	})
	return out, cmd
}

func TestDevCluster(t *testing.T) {
	base := freeBlock(t, 3)
	out := startDev(t, base, "--nodes", "3", "--dir", t.TempDir())
	token := regexp.MustCompile(`Admin token: (ns_\S+)`).FindStringSubmatch(out.String())[1]
	// The hint works as printed on any --base-port: it names the address,
	// and the binary as it can be run (this one is not on PATH).
	try := fmt.Sprintf("Try: SKALD_ADDR=127.0.0.1:%d SKALD_TOKEN=%s %s cluster status", base, token, binary)
	if !strings.Contains(out.String(), try) {
		t.Fatalf("dev output lacks %q: %s", try, out)
	}
	if hint, err := exec.Command("sh", "-c", strings.TrimPrefix(try, "Try: ")).CombinedOutput(); err != nil {
		t.Fatalf("the Try: line fails as printed: %v: %s", err, hint)
	}
	// So does the console's: the binary serves it.
	console := fmt.Sprintf("http://127.0.0.1:%d/ui/", base)
	if !strings.Contains(out.String(), "Console: "+console) {
		t.Fatalf("dev output lacks the console's address %s: %s", console, out)
	}
	if resp, err := http.Get(console); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET %s: %d %q", console, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	node := func(i int) []string {
		return []string{"SKALD_ADDR=127.0.0.1:" + strconv.Itoa(base+10*i), "SKALD_TOKEN=" + token}
	}
	// eventually retries a check until it holds (formation may still be
	// settling: an election, the admin namespace, API addresses).
	eventually := func(what string, check func() (bool, string)) {
		t.Helper()
		testutil.Until(t, 30*time.Second, what, check)
	}
	var st struct {
		LeaderID string `json:"leaderId"`
		Servers  []struct {
			Suffrage string `json:"suffrage"`
		} `json:"servers"`
	}
	var status, errOut string
	var code int
	eventually("a leader and three voters", func() (bool, string) {
		status, errOut, code = runCLI(t, node(1), "cluster", "status", "-o", "json")
		st.Servers = nil
		if code != 0 || json.Unmarshal([]byte(status), &st) != nil || st.LeaderID == "" || len(st.Servers) != 3 {
			return false, status + errOut
		}
		for _, s := range st.Servers {
			if s.Suffrage != "SUFFRAGE_VOTER" {
				return false, status
			}
		}
		return true, ""
	})
	eventually("append on node2", func() (bool, string) {
		_, errOut, code := runCLI(t, node(2), "append", "a-1", "T", `{"x":1}`, "--id", "0192f0c4-0000-7000-8000-0000000000aa")
		return code == 0 || strings.Contains(errOut, "aborted"), errOut
	})
	eventually("read on node0", func() (bool, string) {
		out, errOut, code := runCLI(t, node(0), "read", "a-1", "-o", "json")
		return code == 0 && strings.Contains(out, `"data":{"x":1}`), out + errOut
	})
	// The leader reports every server healthy, as autopilot judges it.
	eventually("the leader to report all three servers healthy", func() (bool, string) {
		for i := 0; i < 3; i++ {
			out, _, _ := runCLI(t, node(i), "cluster", "status", "-o", "json")
			var s struct {
				NodeID   string `json:"nodeId"`
				LeaderID string `json:"leaderId"`
				Servers  []struct {
					Healthy bool `json:"healthy"`
				} `json:"servers"`
			}
			if json.Unmarshal([]byte(out), &s) == nil && s.NodeID == s.LeaderID && len(s.Servers) == 3 {
				return s.Servers[0].Healthy && s.Servers[1].Healthy && s.Servers[2].Healthy, out
			}
		}
		return false, "no node reports itself leader of three"
	})
	// Two of the three report a follower's view (clusterstatus_test.go
	// checks what a follower reports of health and last contact).
	followers := 0
	for i := range 3 {
		out, errOut, code := runCLI(t, node(i), "cluster", "status", "-o", "json")
		var s struct {
			NodeID   string `json:"nodeId"`
			LeaderID string `json:"leaderId"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
			t.Fatalf("status of node%d: %d %s %s", i, code, out, errOut)
		}
		if s.NodeID != s.LeaderID {
			followers++
		}
	}
	if followers != 2 {
		t.Fatalf("%d followers, want 2", followers)
	}
	// transfer-leadership called on a follower is forwarded to the leader.
	for i := range 3 {
		out, _, _ := runCLI(t, node(i), "cluster", "status", "-o", "json")
		var s struct{ NodeID, LeaderID string }
		if json.Unmarshal([]byte(out), &s) != nil || s.NodeID == s.LeaderID {
			continue
		}
		moved, errOut, code := runCLI(t, node(i), "cluster", "transfer-leadership")
		if code != 0 || !strings.Contains(moved, "Leader is now ") || strings.Contains(moved, s.LeaderID) ||
			!strings.Contains(errOut, fmt.Sprintf("127.0.0.1:%d is a follower; forwarding to the leader at 127.0.0.1:", base+10*i)) {
			t.Fatalf("transfer-leadership through follower node%d (leader %s): exit %d: %s %s", i, s.LeaderID, code, moved, errOut)
		}
		break
	}
	// node2 leaves: it is removed from Raft and stops; the others go on.
	if out, errOut, code := runCLI(t, node(2), "leave"); code != 0 || !strings.Contains(out, "left the cluster") {
		t.Fatalf("leave: %d %s %s", code, out, errOut)
	}
	eventually("node2 to stop after leaving", func() (bool, string) {
		return strings.Contains(out.String(), "node2 stopped"), out.String()
	})
	eventually("two servers after the leave", func() (bool, string) {
		status, errOut, code = runCLI(t, node(0), "cluster", "status", "-o", "json")
		st.Servers = nil
		return code == 0 && json.Unmarshal([]byte(status), &st) == nil && len(st.Servers) == 2, fmt.Sprintf("exit %d: %s %s", code, status, errOut)
	})
	if _, errOut, code := runCLI(t, node(1), "append", "a-1", "T", `{"x":2}`); code != 0 {
		t.Fatalf("append after leave: %s", errOut)
	}
}

func TestServerTLS(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := runCLI(t, nil, "tls", "init", "--dir", dir, "--nodes", "1", "--hosts", "127.0.0.1"); code != 0 {
		t.Fatalf("tls init: %s", errOut)
	}
	ca := filepath.Join(dir, "ca.pem")
	var env []string
	p := launch(t, t.TempDir(), func(httpAddr, raftAddr string) []string {
		return []string{"--http-addr", httpAddr, "--raft-addr", raftAddr, "--log-level", "warn", "--admin-token", testAdmin,
			"--tls-cert", filepath.Join(dir, "node0.pem"), "--tls-key", filepath.Join(dir, "node0-key.pem"), "--tls-ca", ca}
	}, func(p *serverProc) bool {
		env = []string{"SKALD_ADDR=https://" + p.addr, "SKALD_TOKEN=" + testAdmin, "SKALD_CA=" + ca}
		_, _, code := runCLI(t, env, "append", "a-1", "T", `{"x":1}`)
		return code == 0
	})
	if out, errOut, code := runCLI(t, env, "read", "a-1", "-o", "json"); code != 0 || !strings.Contains(out, `"data":{"x":1}`) {
		t.Fatalf("read over TLS: %d %s %s", code, out, errOut)
	}
	noCA := []string{"SKALD_ADDR=https://" + p.addr, "SKALD_TOKEN=" + testAdmin, "SKALD_CA="}
	// An untrusted certificate is no "unavailable: retry" (exit 6): the
	// error says what to give.
	if _, errOut, code := runCLI(t, noCA, "read", "a-1"); code != command.ExitFailure || !strings.Contains(errOut, "certificate") || !strings.Contains(errOut, "--ca") {
		t.Fatalf("a client without the CA: exit %d, %s; want exit %d naming --ca", code, errOut, command.ExitFailure)
	}
	if _, errOut, code := runCLI(t, env[:2], "read", "a-1", "--addr", "http://"+p.addr); code == 0 {
		t.Fatalf("plain HTTP was served on a TLS port: %s", errOut)
	}
}

func TestBackupRestoreCLI(t *testing.T) {
	p := startServer(t, "", "--admin-token", testAdmin)
	env := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	for i := 0; i < 5; i++ {
		if _, errOut, code := runCLI(t, env, "append", "acct-1", "T", fmt.Sprintf(`{"i":%d}`, i)); code != 0 {
			t.Fatal(errOut)
		}
	}
	file := filepath.Join(t.TempDir(), "backup.tar")
	if out, errOut, code := runCLI(t, env, "backup", "--out", file); code != 0 || !strings.Contains(out, "Backed up") {
		t.Fatalf("backup: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN="}, "backup", "--out", file+"2"); code != command.ExitAuth {
		t.Fatalf("backup without the admin token: %d %s", code, errOut)
	}
	// The restored node's Raft address is baked into the restore: restore
	// again on new ports if another test took them.
	var q *serverProc
	for attempt := 0; q == nil; attempt++ {
		dir := filepath.Join(t.TempDir(), "restored")
		raftAddr := testutil.FreeAddr(t)
		if out, errOut, code := runCLI(t, nil, "restore", "--from", file, "--data-dir", dir, "--raft-addr", raftAddr); code != 0 || !strings.Contains(out, "Restored Raft index") {
			t.Fatalf("restore: %d %s %s", code, out, errOut)
		}
		p := &serverProc{addr: testutil.FreeAddr(t), dataDir: dir, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
		p.cmd = exec.Command(binary, "server", "--data-dir", dir, "--http-addr", p.addr, "--raft-addr", raftAddr, "--log-level", "warn")
		p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.done <- p.cmd.Wait() }()
		ok := waitReady(t, p, func(q *serverProc) bool {
			out, _, code := runCLI(t, []string{"SKALD_ADDR=" + q.addr, "SKALD_TOKEN=" + testAdmin}, "read", "acct-1", "-o", "json")
			if code != 0 {
				return false
			}
			if strings.Count(out, `"type":"T"`) != 5 || !strings.Contains(out, `"data":{"i":4}`) {
				t.Fatalf("restored node holds %s", out)
			}
			return true
		}, attempt < 10)
		if ok {
			q = p
			t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
		}
	}
	if strings.Contains(q.stdout.String(), "Admin token") {
		t.Fatal("the restored node made a new admin token; the backup's should stay")
	}
	// Offline: back up the stopped original's data directory.
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.done; err != nil {
		t.Fatalf("stop: %v", err)
	}
	p.done <- nil
	offline := filepath.Join(t.TempDir(), "offline.tar")
	if out, errOut, code := runCLI(t, nil, "backup", "--data-dir", p.dataDir, "--out", offline); code != 0 || !strings.Contains(out, "Backed up") {
		t.Fatalf("offline backup: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, nil, "restore", "--from", offline, "--data-dir", filepath.Join(t.TempDir(), "r2"), "--raft-addr", testutil.FreeAddr(t)); code != 0 {
		t.Fatalf("restore of the offline backup: %d %s %s", code, out, errOut)
	}
}

// TestDashboardMetricsExist checks that every skald_* series the Grafana
// dashboard and the alerting rules query is exported by a running server.
func TestDashboardMetricsExist(t *testing.T) {
	p := startServer(t, "", "--admin-token", testAdmin)
	env := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	runCLI(t, env, "append", "a-1", "T", `{}`) // so every histogram has a sample
	runCLI(t, env, "read", "a-1")
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, file := range []string{"../../deploy/grafana/skald.json", "../../deploy/prometheus/alerts.yaml"} {
		queries, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := regexp.MustCompile(`skald_[a-z0-9_]+`).FindAllString(string(queries), -1)
		if len(names) < 10 {
			t.Fatalf("%s queries only %d series", file, len(names))
		}
		for _, n := range names {
			if !regexp.MustCompile(`(?m)^` + n + `(_bucket|_count|_sum)?[{ ]`).Match(body) { // a histogram by its name too
				t.Errorf("%s queries %s, which /metrics does not export", file, n)
			}
		}
	}
}

// appendStreamRequests reads the server's count of AppendStream requests
// from /metrics.
func appendStreamRequests(t *testing.T, addr string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var n float64
	for _, m := range regexp.MustCompile(`(?m)^skald_rpc_requests_total\{code="ok",procedure="/skald.v1.EventStore/AppendStream"\} (\S+)$`).FindAllSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		n += v
	}
	return n
}

// skald bench against a real server: the JSON it prints adds up, and the
// plot is written.
func TestBenchCLI(t *testing.T) {
	p := startServer(t, "", "--admin-token", testAdmin)
	env := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	plot := filepath.Join(t.TempDir(), "bench.html")
	cases := []struct {
		name     string
		args     []string
		perOpMsg int64 // messages per op; -1: varies
	}{
		{"append", []string{"--workload", "append", "--concurrency", "2", "--duration", "2s", "--plot", plot}, 1},
		{"evdb-append", []string{"--workload", "evdb-append", "--concurrency", "2", "--duration", "1s"}, 1},
		{"append-batch", []string{"--workload", "append-batch", "--batch", "10", "--concurrency", "2", "--duration", "1s"}, 10},
		{"read-stream", []string{"--workload", "read-stream", "--streams", "3", "--concurrency", "2", "--duration", "1s"}, 100},
		{"read-category", []string{"--workload", "read-category", "--streams", "3", "--concurrency", "2", "--duration", "1s"}, -1},
		{"append through the cluster client", []string{"--workload", "append", "--target", "cluster", "--concurrency", "2", "--duration", "1s"}, 1},
		{"append over HTTP/2", []string{"--workload", "append", "--http2", "--concurrency", "2", "--duration", "1s"}, 1},
		{"append-stream", []string{"--workload", "append-stream", "--concurrency", "2", "--duration", "1s"}, 1},
		{"mixed through the cluster client", []string{"--workload", "mixed", "--target", "cluster", "--streams", "3", "--concurrency", "2", "--duration", "1s"}, -1},
		{"subscribe", []string{"--workload", "subscribe", "--rate", "200", "--concurrency", "2", "--duration", "1s"}, 1},
		{"subscribe through the cluster client", []string{"--workload", "subscribe", "--target", "cluster", "--rate", "200", "--concurrency", "2", "--duration", "1s"}, 1},
		{"consume through a subscription group", []string{"--workload", "consume", "--rate", "200", "--concurrency", "2", "--duration", "1s"}, 1},
		{"append with an index's lag sampled", []string{"--workload", "append", "--index", "--concurrency", "2", "--duration", "2s"}, 1},
	}
	messagesIn := func(ns string) string {
		t.Helper()
		out, errOut, code := runCLI(t, env, "ns", "info", ns, "-o", "json")
		m := regexp.MustCompile(`"messageCount":"?(\d+)`).FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("ns info %s: %d %s %s", ns, code, out, errOut)
		}
		return m[1]
	}
	before := messagesIn("default")
	streamedBefore := appendStreamRequests(t, p.addr)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, env, append([]string{"bench", "-o", "json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			// Its own namespace, created and deleted; progress in lines
			// (stderr is no terminal here).
			if !regexp.MustCompile(`(?m)^bench: writing into namespace bench-\w+ \(deleted after the run; --token-namespace writes into the token's own\)$`).MatchString(errOut) ||
				!regexp.MustCompile(`(?m)^bench: deleted namespace bench-\w+$`).MatchString(errOut) {
				t.Fatalf("bench does not say it runs in a namespace of its own: %s", errOut)
			}
			if strings.Contains(errOut, "\r") {
				t.Fatalf("progress with carriage returns on a pipe: %q", errOut)
			}
			var res bench.Result
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("%v: %q", err, out)
			}
			l := res.LatencyMS
			if res.Ops == 0 || res.Errors != 0 || (tc.perOpMsg > 0 && res.Messages != res.Ops*tc.perOpMsg) || res.OpsPerSec <= 0 ||
				!(l["p50"] > 0 && l["p50"] <= l["p99"] && l["p99"] <= l["max"]) {
				t.Fatalf("result %+v", res)
			}
			var timed int64
			for _, s := range res.Timeline {
				timed += int64(s.Ops)
			}
			if timed != res.Ops || len(res.Timeline) == 0 {
				t.Fatalf("timeline holds %d ops in %d seconds, result %d", timed, len(res.Timeline), res.Ops)
			}
			for _, s := range res.Timeline {
				if s.Ops > 0 && !(s.P50MS <= s.P99MS && s.P99MS <= s.P999MS && s.P999MS <= s.MaxMS) {
					t.Fatalf("second %d: p50 %v p99 %v p99.9 %v max %v", s.Second, s.P50MS, s.P99MS, s.P999MS, s.MaxMS)
				}
			}
			// The slowest calls, slowest first, the first the run's max,
			// each with the time it was sent and, pinned, its node (not
			// for subscribe and consume, whose latency is a message's
			// delivery, not a call).
			want := int(min(res.Ops, 10))
			if strings.HasPrefix(tc.name, "subscribe") || strings.HasPrefix(tc.name, "consume") {
				want = 0
			}
			if len(res.Slowest) != want || (want > 0 && res.Slowest[0].MS != l["max"]) {
				t.Fatalf("slowest %+v of %d ops, max %v", res.Slowest, res.Ops, l["max"])
			}
			for i, c := range res.Slowest {
				if _, err := time.Parse("15:04:05.000", c.SentAt); err != nil || (i > 0 && c.MS > res.Slowest[i-1].MS) ||
					(c.Node == "") != slices.Contains(tc.args, "cluster") {
					t.Fatalf("slowest call %d: %+v (%v)", i, c, err)
				}
			}
			// The server spent CPU on the run (fsyncs, applies): the admin
			// token reads /metrics.
			if perOp := res.ServerCPUSeconds * 1e6 / float64(res.Ops); res.ServerCPUSeconds <= 0 ||
				math.Abs(res.ServerCPUUsPerOp-perOp) > 1e-6*perOp || (tc.perOpMsg > 0 && math.Abs(res.ServerCPUUsPerMsg*float64(tc.perOpMsg)-perOp) > 1e-6*perOp) {
				t.Fatalf("server CPU: %v s, %v µs/op, %v µs/msg over %d ops", res.ServerCPUSeconds, res.ServerCPUUsPerOp, res.ServerCPUUsPerMsg, res.Ops)
			}
			// --index: the node's lag on the run's index, sampled every
			// 100 ms (at least a few samples in 2 s on a loaded machine).
			if il := res.IndexLagMS; slices.Contains(tc.args, "--index") != (il != nil) {
				t.Fatalf("index lag %v with args %v", il, tc.args)
			} else if il != nil && (res.IndexLagSamples < 3 || !(il["p50"] >= 0 && il["p50"] <= il["p99"] && il["p99"] <= il["max"]) ||
				!regexp.MustCompile(`(?m)^index lag \(LOCAL, \d+ samples every 100ms per node, \d+ failed\): p50 [\d.]+ ms  p99 [\d.]+ ms  max [\d.]+ ms; at most \d+ events behind$`).MatchString(errOut)) {
				t.Fatalf("index lag %v over %d samples (at most %d events behind); stderr %s", il, res.IndexLagSamples, res.IndexLagEventsMax, errOut)
			}
			// append-stream's appends went over AppendStream, the others' not.
			if streamed := appendStreamRequests(t, p.addr); (tc.name == "append-stream") != (streamed > streamedBefore) {
				t.Fatalf("AppendStream requests %v → %v", streamedBefore, streamed)
			} else {
				streamedBefore = streamed
			}
		})
	}
	// Nothing was left behind: no namespace, no message in the token's.
	if after := messagesIn("default"); after != before {
		t.Fatalf("bench left messages in the token's namespace: %s before, %s after", before, after)
	}
	if out, _, _ := runCLI(t, env, "ns", "list"); strings.Contains(out, "bench-") {
		t.Fatalf("bench left its namespace: %s", out)
	}
	// Unless told: --token-namespace writes into the token's namespace.
	if _, errOut, code := runCLI(t, env, "bench", "--workload", "append", "--concurrency", "1", "--duration", "1s", "--token-namespace"); code != 0 || strings.Contains(errOut, "bench-") {
		t.Fatalf("bench --token-namespace: exit %d: %s", code, errOut)
	}
	if after := messagesIn("default"); after == before {
		t.Fatal("bench --token-namespace wrote nothing into the token's namespace")
	}
	// A namespace token cannot create a namespace: bench says what to do.
	out, errOut, code := runCLI(t, env, "ns", "create", "benchns", "-o", "json")
	var created struct{ Token string }
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil {
		t.Fatalf("ns create: %d %s", code, errOut)
	}
	nsEnv := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + created.Token}
	if _, errOut, code := runCLI(t, nsEnv, "bench", "--duration", "1s"); code != command.ExitAuth || !strings.Contains(errOut, "pass --token-namespace") {
		t.Fatalf("bench with a namespace token: exit %d: %s", code, errOut)
	}
	page, err := os.ReadFile(plot)
	if err != nil || !strings.Contains(string(page), "<h2>append (all, concurrency 2)</h2>") || strings.Count(string(page), "<polyline") != 4 {
		t.Fatalf("plot %s: %v\n%s", plot, err, page)
	}
	if _, errOut, code := runCLI(t, env, "bench", "--batch", "0"); code != command.ExitUsage || !strings.Contains(errOut, "--batch 1..1000") {
		t.Fatalf("bad --batch: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, env, "bench", "--workload", "read-stream", "--index"); code != command.ExitUsage || !strings.Contains(errOut, "--index: the read-stream workload writes no category to index") {
		t.Fatalf("bench --index of reads: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, env, "bench", "--target", "some"); code != command.ExitUsage || !strings.Contains(errOut, "want all, leader, followers or cluster") {
		t.Fatalf("bad --target: exit %d, %q", code, errOut)
	}
	// A node that does not answer: the pinned clients report it at once.
	if _, errOut, code := runCLI(t, []string{"SKALD_ADDR=127.0.0.1:1", "SKALD_TOKEN=" + testAdmin}, "bench", "--workload", "read-stream", "--duration", "1s"); code != command.ExitUnreachable || !strings.Contains(errOut, "no answer from 127.0.0.1:1") {
		t.Fatalf("bench against a dead node: exit %d, %q", code, errOut)
	}
}
