package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDevSecretsNotOnCommandLine: the servers skald dev starts get the
// admin token and the gossip key through files only this user can read,
// not on their command lines (which every local user sees in ps) nor in
// their environment; the cluster forms and the token works.
func TestDevSecretsNotOnCommandLine(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	base := freeBlock(t, 1)
	dir := t.TempDir()
	_, dev := startDevCmd(t, base, "--nodes", "1", "--dir", dir)
	b, err := os.ReadFile(filepath.Join(dir, "dev.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st devState
	if err := json.Unmarshal(b, &st); err != nil || st.AdminToken == "" || st.GossipKey == "" {
		t.Fatalf("dev.json: %s (%v)", b, err)
	}
	servers := childProcesses(t, dev.Process.Pid)
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
