package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skalddb/skald/internal/testutil"
)

// TestMetricsAddr: with --metrics-tenant-labels, the group metrics carry
// the namespace and group; --metrics-addr serves them without a token,
// while the API port's anonymous /metrics names no tenant.
func TestMetricsAddr(t *testing.T) {
	t.Parallel()
	var metricsAddr string
	p := launch(t, t.TempDir(), func(httpAddr, raftAddr string) []string {
		metricsAddr = testutil.FreeAddr(t)
		return []string{"--http-addr", httpAddr, "--raft-addr", raftAddr, "--log-level", "warn", "--admin-token", testAdmin,
			"--metrics-addr", metricsAddr, "--metrics-tenant-labels"}
	}, func(p *serverProc) bool { return p.admin(t) })
	admin := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + testAdmin}
	out, errOut, code := runCLI(t, admin, "ns", "create", "acme")
	m := regexp.MustCompile(`ns_\S+`).FindString(out)
	if code != 0 || m == "" {
		t.Fatalf("ns create: %d %s %s", code, out, errOut)
	}
	tenant := []string{"SKALD_ADDR=" + p.addr, "SKALD_TOKEN=" + m}
	if _, errOut, code := runCLI(t, tenant, "sub", "create", "payroll", "--all"); code != 0 {
		t.Fatalf("sub create: %d %s", code, errOut)
	}
	ctx, cancel := context.WithCancel(context.Background())
	consumer := exec.CommandContext(ctx, binary, "sub", "consume", "payroll")
	consumer.Env = append(os.Environ(), tenant...)
	if err := consumer.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); consumer.Wait() })

	get := func(url string) string {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
		}
		return string(b)
	}
	want := `skald_group_consumers{group="payroll",namespace="acme"} 1`
	testutil.Until(t, 30*time.Second, "the labelled group series on --metrics-addr", func() (bool, string) {
		body := get("http://" + metricsAddr + "/metrics")
		return strings.Contains(body, "\n"+want+"\n"), body
	})
	api := get("http://" + p.addr + "/metrics")
	if strings.Contains(api, "acme") || strings.Contains(api, "payroll") {
		t.Fatalf("the API port's anonymous /metrics names the tenant:\n%s", api)
	}
	if !strings.Contains(api, "\nskald_raft_term ") {
		t.Fatalf("the API port's anonymous /metrics lacks skald_raft_term")
	}
}
