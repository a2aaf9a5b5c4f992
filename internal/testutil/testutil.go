// Package testutil holds the helpers that tests across Skald share: waits
// on a condition with a deadline, a free loopback address, and a logger
// that stays quiet unless SKALD_TEST_LOG is set.
//
// Only tests and the test harnesses built for them (node's
// testcluster.go, tests/testcluster) import it; production code must
// never call it. Nothing here sleeps as an assertion: every wait polls a
// condition and fails the test at its deadline.
//
// The helpers take TB, not testing.TB, so a harness that also runs
// outside a testing.T (a TestMain's shared cluster) can use them, and so
// the package does not import "testing".
package testutil

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// TB is what the helpers need of a test: testing.TB has it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// PollInterval is how often Eventually and Until check their condition.
const PollInterval = 10 * time.Millisecond

// Eventually waits until cond holds, checking every PollInterval; past
// timeout it fails the test with what it was waiting for.
func Eventually(t TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Until(t, timeout, what, func() (bool, string) { return cond(), "" })
}

// Until is Eventually for a condition that can say why it does not hold
// yet: the last reason is part of the failure.
func Until(t TB, timeout time.Duration, what string, cond func() (ok bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if why != "" {
				t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, why)
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(PollInterval)
	}
}

// FreeAddr returns a loopback TCP address that was free a moment ago.
// Another process may take it before the caller listens: callers that
// start servers retry on "address already in use".
func FreeAddr(t TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free address: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Logger discards everything unless SKALD_TEST_LOG is set; then it writes
// debug-level text to stderr, tagged with the test's name.
func Logger(t interface{ Name() string }) *slog.Logger {
	if os.Getenv("SKALD_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
}

// SyncBuffer is a log destination several goroutines write while a test
// reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *SyncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// String is what was written so far.
func (w *SyncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
