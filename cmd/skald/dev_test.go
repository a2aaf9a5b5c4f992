package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/cmd/skald/internal/dev"
	"github.com/skalddb/skald/internal/testutil"
)

// TestDevSecretsNotOnCommandLine: the servers skald dev starts get the
// admin token and the gossip key through files only this user can read,
// not on their command lines (which every local user sees in ps) nor in
// their environment; the cluster forms and the token works.
func TestDevSecretsNotOnCommandLine(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	base := freeBlock(t, 1)
	dir := t.TempDir()
	_, devProc := startDevCmd(t, base, "--nodes", "1", "--dir", dir)
	b, err := os.ReadFile(filepath.Join(dir, "dev.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st dev.State
	if err := json.Unmarshal(b, &st); err != nil || st.AdminToken == "" || st.GossipKey == "" {
		t.Fatalf("dev.json: %s (%v)", b, err)
	}
	servers := childProcesses(t, devProc.Process.Pid)
	if len(servers) != 1 {
		t.Fatalf("dev runs %d processes, want 1 server", len(servers))
	}
	for _, pid := range servers {
		argv, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			t.Fatal(err)
		}
		environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(string(bytes.TrimRight(argv, "\x00")), "\x00")
		for what, secret := range map[string]string{"admin token": st.AdminToken, "gossip key": st.GossipKey} {
			if bytes.Contains(argv, []byte(secret)) {
				t.Errorf("server %d has the %s on its command line: %q", pid, what, args)
			}
			if bytes.Contains(environ, []byte(secret)) {
				t.Errorf("server %d has the %s in its environment", pid, what)
			}
		}
		for _, flag := range []string{"--admin-token-file", "--gossip-key-file"} {
			if !strings.Contains(strings.Join(args, " "), flag+" "+dir) {
				t.Errorf("server %d command line %q lacks %s", pid, args, flag)
			}
		}
	}
	for name, want := range map[string]string{"admin-token": st.AdminToken, "gossip-key": st.GossipKey} {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", path, fi.Mode().Perm())
		}
		if got, _ := os.ReadFile(path); strings.TrimSpace(string(got)) != want {
			t.Errorf("%s holds %q, want dev.json's %q", path, got, want)
		}
	}
	env := []string{"SKALD_ADDR=127.0.0.1:" + strconv.Itoa(base), "SKALD_TOKEN=" + st.AdminToken}
	if out, errOut, code := runCLI(t, env, "ns", "list"); code != 0 {
		t.Fatalf("the admin token from the file does not work: exit %d: %s %s", code, out, errOut)
	}
}

// childProcesses returns the pids whose parent is ppid (from /proc).
func childProcesses(t *testing.T, ppid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(ppid) {
			kids = append(kids, pid)
		}
	}
	return kids
}

// TestDevNodeDiesAndComesBack: when a node of skald dev dies (kill -9),
// the others keep running and dev says what happened and how to bring it
// back; skald dev restart N brings it back with its data, and skald dev
// kill N kills one for a demo.
func TestDevNodeDiesAndComesBack(t *testing.T) {
	t.Parallel()
	base := freeBlock(t, 3)
	dir := t.TempDir()
	out, _ := startDevCmd(t, base, "--nodes", "3", "--dir", dir)
	token := regexp.MustCompile(`Admin token: (ns_\S+)`).FindStringSubmatch(out.String())[1]
	pidOf := func(i int) int {
		t.Helper()
		m := regexp.MustCompile(fmt.Sprintf(`(?m)^node%d .* pid (\d+)$`, i)).FindAllStringSubmatch(out.String(), -1)
		if len(m) == 0 {
			t.Fatalf("dev output names no pid of node%d: %s", i, out)
		}
		pid, _ := strconv.Atoi(m[len(m)-1][1])
		return pid
	}
	node := func(i int) []string {
		return []string{"SKALD_ADDR=127.0.0.1:" + strconv.Itoa(base+10*i), "SKALD_TOKEN=" + token}
	}
	testutil.Until(t, 30*time.Second, "a leader and three voters", func() (bool, string) {
		out, errOut, code := runCLI(t, node(0), "cluster", "status", "-o", "json")
		return code == 0 && strings.Count(out, "SUFFRAGE_VOTER") == 3 && !strings.Contains(out, `"leaderId":""`), out + errOut
	})
	if err := syscall.Kill(pidOf(1), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Until(t, 20*time.Second, "dev to report node1's death", func() (bool, string) {
		return regexp.MustCompile(`(?s)node1 \(pid \d+\) died: signal: killed\. node0 and node2 keep running \(2 of 3, a majority: the cluster still serves\)\..*Bring it back: \S+ dev restart 1 --dir ` + regexp.QuoteMeta(dir)).MatchString(out.String()), out.String()
	})
	// The others serve on: a write lands while node1 is down.
	testutil.Until(t, 30*time.Second, "an append on node0 with node1 down", func() (bool, string) {
		_, errOut, code := runCLI(t, node(0), "append", "down-1", "T", `{"while":"node1 was down"}`, "--id", "0192f0c4-0000-7000-8000-0000000000d1")
		return code == 0, errOut
	})
	if _, errOut, code := runCLI(t, nil, "dev", "restart", "7", "--dir", dir); code != command.ExitUsage || !strings.Contains(errOut, "no node7") {
		t.Fatalf("dev restart 7: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, nil, "dev", "restart", "1", "--dir", t.TempDir()); code != command.ExitUnreachable || !strings.Contains(errOut, "no skald dev runs in") {
		t.Fatalf("dev restart without a dev: exit %d: %s", code, errOut)
	}
	if got, errOut, code := runCLI(t, nil, "dev", "restart", "1", "--dir", dir); code != 0 || !strings.Contains(got, "node1 started (pid ") {
		t.Fatalf("dev restart 1: exit %d: %s %s", code, got, errOut)
	}
	testutil.Until(t, 60*time.Second, "node1 to serve again with what was written while it was down", func() (bool, string) {
		got, errOut, _ := runCLI(t, node(1), "read", "down-1", "-o", "json")
		return strings.Contains(got, `"data":{"while":"node1 was down"}`), got + errOut
	})
	testutil.Until(t, 30*time.Second, "dev to say node1 is back", func() (bool, string) {
		return strings.Contains(out.String(), "node1 is ready again"), out.String()
	})
	// Restarting a running node stops it first; its exit is no death.
	if got, errOut, code := runCLI(t, nil, "dev", "restart", "0", "--dir", dir); code != 0 || !strings.Contains(got, "node0 started (pid ") {
		t.Fatalf("dev restart 0 (running): exit %d: %s %s", code, got, errOut)
	}
	testutil.Until(t, 60*time.Second, "node0 to be ready again after its restart", func() (bool, string) {
		return strings.Contains(out.String(), "node0 stopped for a restart") && strings.Contains(out.String(), "node0 is ready again"), out.String()
	})
	if strings.Contains(out.String(), "node0 (pid") {
		t.Fatalf("dev reported node0's restart as a death: %s", out)
	}
	// skald dev kill N: a kill -9 without looking for the pid.
	pid2 := pidOf(2)
	if got, errOut, code := runCLI(t, nil, "dev", "kill", "2", "--dir", dir); code != 0 || !strings.Contains(got, fmt.Sprintf("killed node2 (pid %d)", pid2)) {
		t.Fatalf("dev kill 2: exit %d: %s %s", code, got, errOut)
	}
	testutil.Until(t, 20*time.Second, "dev to report node2's death", func() (bool, string) {
		return strings.Contains(out.String(), fmt.Sprintf("node2 (pid %d) died: signal: killed", pid2)), out.String()
	})
	// node1 is back, so two of three still run.
	if !strings.Contains(out.String(), "node0 and node1 keep running (2 of 3, a majority") {
		t.Fatalf("dev did not say node0 and node1 keep a majority: %s", out)
	}
	if _, errOut, code := runCLI(t, nil, "dev", "kill", "2", "--dir", dir); code != command.ExitFailure || !strings.Contains(errOut, "node2 is not running") {
		t.Fatalf("dev kill of a dead node: exit %d: %s", code, errOut)
	}
}
