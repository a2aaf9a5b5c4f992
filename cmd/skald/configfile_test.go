package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The layers of the server's configuration, through the built binary's
// --print-config: a flag wins over SKALD_<FLAG>, which wins over the
// --config file, which wins over the default; secrets are masked.
func TestServerConfigLayers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "skald.yaml")
	if err := os.WriteFile(file, []byte(`# a node's settings
data-dir: /var/lib/skald
http-addr: 0.0.0.0:8080
log-level: warn
join: [skald1:7946, skald2:7946]
cache-bytes: 1048576
leave-on-terminate: true
cluster-secret: 0123456789abcdef-from-the-file
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, []string{"SKALD_HTTP_ADDR=127.0.0.1:9090", "SKALD_LOG_LEVEL=info"},
		"server", "--config", file, "--log-level", "debug", "--print-config")
	if code != 0 {
		t.Fatalf("--print-config: exit %d: %s", code, errOut)
	}
	cases := []struct{ key, value, source string }{
		{"log-level", "debug", "flag"},         // flag over env over file
		{"http-addr", "127.0.0.1:9090", "env"}, // env over file
		{"data-dir", "/var/lib/skald", "file"}, // file over default
		{"join", "skald1:7946,skald2:7946", "file"},
		{"cache-bytes", "1048576", "file"},
		{"leave-on-terminate", "true", "file"},
		{"raft-addr", "127.0.0.1:8081", "default"},
		{"cluster-secret", "********", "file"}, // masked
	}
	for _, c := range cases {
		want := c.key + `: "` + c.value + `"  # ` + c.source
		if !strings.Contains(out, want+"\n") {
			t.Errorf("want the line %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "from-the-file") {
		t.Errorf("--print-config shows a secret:\n%s", out)
	}

	for _, bad := range []struct{ name, yaml, want string }{
		{"unknown key", "data-dri: /x\n", `unknown key "data-dri"`},
		{"wrong type", "cache-bytes: lots\n", "cache-bytes"},
		{"not a mapping", "- data-dir\n", "config"},
		{"a map value", "join: {a: 1}\n", "join"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(bad.name, " ", "-")+".yaml")
			if err := os.WriteFile(f, []byte(bad.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, errOut, code := runCLI(t, nil, "server", "--config", f, "--print-config")
			if code != 2 || !strings.Contains(errOut, bad.want) {
				t.Fatalf("exit %d, want 2 naming %q: %s", code, bad.want, errOut)
			}
		})
	}
}

// A server started with --config (here from SKALD_CONFIG) runs with the
// file's settings: its admin token works only if the file was read.
func TestServerRunsFromConfigFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "skald.yaml")
	if err := os.WriteFile(file, []byte("admin-token: "+testAdmin+"\ncors-origins: [https://a.example, https://b.example]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SKALD_CONFIG", file)
	p := startServer(t, "", "--node-name", "from-config") // waits until the file's admin token works
	out, _, code := runCLI(t, []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}, "ns", "list", "-o", "json")
	if code != 0 || !regexp.MustCompile(`"default"`).MatchString(out) {
		t.Fatalf("ns list with the file's admin token: exit %d %s", code, out)
	}
}

// deploy/skald.yaml, the documented example, loads.
func TestExampleConfigLoads(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCLI(t, nil, "server", "--config", "../../deploy/skald.yaml", "--print-config")
	if code != 0 || !strings.Contains(out, `bootstrap-expect: "3"  # file`) {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
}
