package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skalddb/skald/internal/testutil"
)

// logLines parses every line a server wrote to stderr as JSON, failing
// the test on one that is not.
func logLines(t *testing.T, name, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s logged a line that is not JSON: %s", name, line)
		}
		if msg, _ := m["msg"].(string); strings.HasPrefix(msg, "[") || strings.Contains(line, "%+v") {
			t.Fatalf("%s logged a library's raw text: %s", name, line)
		}
		out = append(out, m)
	}
	return out
}

// TestServerLogsJSON: with --log-format json every line is JSON, net/http's
// own (a TLS handshake error) and Raft's configuration line included, and
// Raft's server list is a list of objects, not Go's "%+v" text (both used
// to be raw text).
func TestServerLogsJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, errOut, code := runCLI(t, nil, "tls", "init", "--dir", dir, "--nodes", "1", "--hosts", "127.0.0.1"); code != 0 {
		t.Fatalf("tls init: %s", errOut)
	}
	ca := filepath.Join(dir, "ca.pem")
	env := func(p *serverProc) []string {
		return []string{"SKALD_ADDR=https://" + p.addr, "SKALD_TOKEN=" + testAdmin, "SKALD_CA=" + ca}
	}
	p := launch(t, t.TempDir(), func(httpAddr, raftAddr string) []string {
		return []string{"--http-addr", httpAddr, "--raft-addr", raftAddr, "--log-level", "info", "--log-format", "json", "--admin-token", testAdmin,
			"--tls-cert", filepath.Join(dir, "node0.pem"), "--tls-key", filepath.Join(dir, "node0-key.pem"), "--tls-ca", ca}
	}, func(p *serverProc) bool {
		_, _, code := runCLI(t, env(p), "append", "a-1", "T", `{"x":1}`)
		return code == 0
	})
	// Plain HTTP on the TLS port: net/http logs a handshake error.
	if resp, err := http.Get("http://" + p.addr + "/healthz"); err == nil {
		resp.Body.Close()
	}
	testutil.Until(t, 10*time.Second, "net/http's handshake error in the log", func() (bool, string) {
		for _, m := range logLines(t, "the server", p.stderr.String()) {
			if m["component"] == "http" && strings.Contains(m["msg"].(string), "TLS handshake error") {
				return true, ""
			}
		}
		return false, p.stderr.String()
	})
	var conf map[string]any
	for _, m := range logLines(t, "the server", p.stderr.String()) {
		if m["component"] == "raft" && m["msg"] == "initial configuration" {
			conf = m
		}
	}
	servers, _ := conf["servers"].([]any)
	if len(servers) != 1 {
		t.Fatalf("Raft's initial configuration line lists servers %v, want one: %v", conf["servers"], conf)
	}
	if s, _ := servers[0].(map[string]any); s["suffrage"] != "Voter" || s["id"] == "" || !strings.HasPrefix(s["address"].(string), "127.0.0.1:") {
		t.Fatalf("Raft's initial configuration lists %v, want the voter with its id and address", servers[0])
	}
}
