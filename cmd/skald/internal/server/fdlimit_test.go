package server

import (
	"bytes"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestFDLimitRaisedByRuntime checks the premise of --max-connections'
// default: Go raises the soft RLIMIT_NOFILE to the hard limit when the
// process starts (Go >= 1.19, Unix), so skald does not do it again.
func TestFDLimitRaisedByRuntime(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("RLIMIT_NOFILE is raised on Unix")
	}
	soft, hard, err := fdLimit()
	if err != nil {
		t.Fatal(err)
	}
	if soft == 0 || (runtime.GOOS == "linux" && soft != hard) {
		t.Fatalf("soft fd limit %d, hard %d: the runtime should have raised the soft one", soft, hard)
	}
}

func TestDefaultMaxConnections(t *testing.T) {
	reserve := storageFDs(64) // 65 x 272 + 1024 = 18704
	if reserve != 18704 {
		t.Fatalf("storageFDs(64) = %d, want 18704", reserve)
	}
	for _, c := range []struct {
		name      string
		limit     uint64
		open      int
		want      int
		wantShort bool
	}{
		{"unknown limit", 0, 64, maxDefaultConnections, false},
		{"systemd's 524288", 524288, 64, maxDefaultConnections, false},
		{"the finding's 20600 or so", 20600, 64, 20600 - 18704, false},
		{"just enough", 18704 + 64, 64, 64, false},
		{"short: a quarter", 4096, 64, 1024, true},
		{"short: at least 64", 200, 64, 64, true},
		{"few namespaces", 8192, 4, 8192 - 5*272 - 1024, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, short := defaultMaxConnections(c.limit, c.open)
			if got != c.want || short != c.wantShort {
				t.Fatalf("defaultMaxConnections(%d, %d) = %d, %v; want %d, %v", c.limit, c.open, got, short, c.want, c.wantShort)
			}
		})
	}
}

// TestLogFDLimit: the log names the effective limit and the cap, and
// warns when the limit is below storage's share plus the cap.
func TestLogFDLimit(t *testing.T) {
	soft, _, err := fdLimit()
	if err != nil {
		t.Skip(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	logFDLimit(log, 100, 4)
	if out := buf.String(); !strings.Contains(out, "soft=") || !strings.Contains(out, "max-connections=100") {
		t.Fatalf("log: %s", out)
	}
	buf.Reset()
	logFDLimit(log, int(soft), 64) // more connections than the limit holds
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "raise LimitNOFILE") {
		t.Fatalf("log: %s", out)
	}
}

func TestAPILimitFlags(t *testing.T) {
	base := []string{"--in-memory"}
	for _, c := range []struct {
		args []string
		err  string // "" valid
	}{
		{nil, ""},
		{[]string{"--max-connections", "100", "--read-timeout", "5s", "--write-timeout", "2m", "--idle-timeout", "10s",
			"--read-page-bytes", "1048576", "--read-scan-budget", "5000", "--append-stream-in-flight", "16",
			"--max-connections-per-ip", "32", "--reply-budget-bytes", "8388608"}, ""},
		{[]string{"--max-connections", "-1"}, "--max-connections must not be negative"},
		{[]string{"--max-connections-per-ip", "-1"}, "--max-connections-per-ip must not be negative"},
		{[]string{"--read-timeout", "10ms"}, "--read-timeout must be at least 1s"},
		{[]string{"--write-timeout", "0s"}, "--write-timeout must be at least 1s"},
		{[]string{"--idle-timeout", "1ms"}, "--idle-timeout must be at least 1s"},
		{[]string{"--read-page-bytes", "1000"}, "--read-page-bytes must be between 64 KiB and 64 MiB"},
		{[]string{"--read-scan-budget", "999"}, "--read-scan-budget must be between 1000 and 100000000"},
		{[]string{"--read-scan-budget", "100000001"}, "--read-scan-budget must be between 1000 and 100000000"},
		{[]string{"--append-stream-in-flight", "0"}, "--append-stream-in-flight must be between 1 and 65536"},
		{[]string{"--reply-budget-bytes", "1048576"},
			"--reply-budget-bytes must be between --read-page-bytes (3145728) and 1 TiB"},
		{[]string{"--read-page-bytes", "1048576", "--reply-budget-bytes", "1048575"},
			"--reply-budget-bytes must be between --read-page-bytes (1048576)"},
	} {
		f, err := parseServerFlags(append(base, c.args...), io.Discard)
		if err == nil && len(c.args) == 0 {
			if got := f.limits.connectionsPerIP(16384); got != 256 { // on by default
				t.Errorf("default --max-connections-per-ip under 16384 connections: %d, want 256", got)
			}
		}
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%v: got %v, want %q", c.args, err, c.err)
		case c.err == "" && len(c.args) > 0:
			l := f.limits.rpcLimits()
			if l.ReadTimeout != 5*time.Second || l.WriteTimeout != 2*time.Minute || l.IdleTimeout != 10*time.Second ||
				l.PageBytes != 1<<20 || l.ScanBudget != 5000 || l.AppendStreamInFlight != 16 || l.ReplyBudgetBytes != 8<<20 ||
				f.limits.connections(64) != 100 || f.limits.connectionsPerIP(100) != 32 {
				t.Errorf("%v: limits %+v, connections %d, per IP %d", c.args, l, f.limits.connections(64),
					f.limits.connectionsPerIP(100))
			}
		}
	}
}
