package server

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

const testAdmin = "ns_ZGVmYXVsdA_0000000000000000000000000000000000000000000000000000000000000000"

const testGossipKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // base64 of 32 bytes

// writeSecret writes content to a file of mode perm in dir.
func writeSecret(t *testing.T, dir, name, content string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

// TestSecretFiles: --admin-token-file, --gossip-key-file and
// --cluster-secret-file (or their SKALD_*_FILE variables) set the secret
// from the file's trimmed content; a file any user may read is accepted
// with a warning; a secret given both ways, or a file that is missing,
// empty or holds a malformed secret, is a usage error naming the flag.
func TestSecretFiles(t *testing.T) {
	for _, v := range []string{"SKALD_ADMIN_TOKEN", "SKALD_GOSSIP_KEY", "SKALD_CLUSTER_SECRET", "SKALD_ADMIN_TOKEN_FILE", "SKALD_GOSSIP_KEY_FILE", "SKALD_CLUSTER_SECRET_FILE"} {
		t.Setenv(v, "") // empty counts as not given
	}
	dir := t.TempDir()
	token := writeSecret(t, dir, "admin-token", "  "+testAdmin+"\n\n", 0o600)
	key := writeSecret(t, dir, "gossip-key", testGossipKey+"\n", 0o640)
	secret := writeSecret(t, dir, "cluster-secret", "\tshared cluster secret \n", 0o400)
	open := writeSecret(t, dir, "open-token", testAdmin, 0o644)
	empty := writeSecret(t, dir, "empty", " \n", 0o600)
	badKey := writeSecret(t, dir, "bad-key", "not-base64!", 0o600)
	shortKey := writeSecret(t, dir, "short-key", "AAAA", 0o600)
	otherToken := writeSecret(t, dir, "other-token", "ns_c2hvcA_"+strings.Repeat("0", 64), 0o600)
	// Kubernetes mounts a secret as a symlink to a file in a ..data
	// directory.
	k8s := filepath.Join(dir, "k8s")
	if err := os.MkdirAll(filepath.Join(k8s, "..2026_01_01"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeSecret(t, filepath.Join(k8s, "..2026_01_01"), "gossip-key", testGossipKey, 0o440)
	for _, l := range [][2]string{{"..2026_01_01", "..data"}, {"..data/gossip-key", "gossip-key"}} {
		if err := os.Symlink(l[0], filepath.Join(k8s, l[1])); err != nil {
			t.Fatal(err)
		}
	}

	type want struct{ adminToken, gossipKey, clusterSecret, warning string }
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want want
	}{
		{"admin token, trimmed", []string{"--admin-token-file", token}, nil, want{adminToken: testAdmin}},
		{"gossip key from the environment", nil, map[string]string{"SKALD_GOSSIP_KEY_FILE": key}, want{gossipKey: testGossipKey}},
		{"cluster secret, inner space kept", []string{"--cluster-secret-file", secret}, nil, want{clusterSecret: "shared cluster secret"}},
		{"all three", []string{"--admin-token-file", token, "--gossip-key-file", key, "--cluster-secret-file", secret}, nil, want{adminToken: testAdmin, gossipKey: testGossipKey, clusterSecret: "shared cluster secret"}},
		{"through Kubernetes symlinks", []string{"--gossip-key-file", filepath.Join(k8s, "gossip-key")}, nil, want{gossipKey: testGossipKey}},
		{"world-readable: a warning", []string{"--admin-token-file", open}, nil, want{adminToken: testAdmin, warning: "--admin-token-file " + open + " is readable by every user of this machine (mode 0644)"}},
		{"the plain flags still work", []string{"--admin-token", testAdmin}, map[string]string{"SKALD_GOSSIP_KEY": testGossipKey}, want{adminToken: testAdmin, gossipKey: testGossipKey}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			f, err := parseServerFlags(tc.args, io.Discard)
			if err != nil {
				t.Fatalf("parse %v: %v", tc.args, err)
			}
			got := want{adminToken: f.adminToken, gossipKey: f.gossipKey, clusterSecret: f.clusterSecret, warning: strings.Join(f.secretWarnings, "; ")}
			if tc.want.warning != "" && strings.HasPrefix(got.warning, tc.want.warning) {
				got.warning = tc.want.warning
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}

	errCases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"flag and file", []string{"--admin-token", testAdmin, "--admin-token-file", token}, nil,
			"--admin-token (or SKALD_ADMIN_TOKEN) and --admin-token-file (or SKALD_ADMIN_TOKEN_FILE) are both set: give the secret one way"},
		{"environment and file", []string{"--gossip-key-file", key}, map[string]string{"SKALD_GOSSIP_KEY": testGossipKey},
			"--gossip-key (or SKALD_GOSSIP_KEY) and --gossip-key-file (or SKALD_GOSSIP_KEY_FILE) are both set"},
		{"flag and file from the environment", []string{"--cluster-secret", "s"}, map[string]string{"SKALD_CLUSTER_SECRET_FILE": secret},
			"--cluster-secret (or SKALD_CLUSTER_SECRET) and --cluster-secret-file (or SKALD_CLUSTER_SECRET_FILE) are both set"},
		{"missing file", []string{"--admin-token-file", filepath.Join(dir, "nope")}, nil, "--admin-token-file: open " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"a directory", []string{"--cluster-secret-file", dir}, nil, "--cluster-secret-file: " + dir + " is not a regular file"},
		{"empty file", []string{"--cluster-secret-file", empty}, nil, "--cluster-secret-file: " + empty + " is empty"},
		{"gossip key not base64", []string{"--gossip-key-file", badKey}, nil, "--gossip-key-file " + badKey + ": not base64"},
		{"gossip key too short", []string{"--gossip-key-file", shortKey}, nil, "--gossip-key-file " + shortKey + ": 3 bytes, want 16, 24 or 32"},
		{"token of another namespace", []string{"--admin-token-file", otherToken}, nil, "--admin-token-file " + otherToken + `: not a token of the "default" namespace`},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := parseServerFlags(tc.args, io.Discard)
			var ee *command.ExitError
			if !errors.As(err, &ee) || ee.Code != command.ExitUsage || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("parse %v: %v, want a usage error starting %q", tc.args, err, tc.want)
			}
		})
	}
}
