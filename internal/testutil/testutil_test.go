package testutil

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of stopping the
// test, so the helpers' failures can be checked.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r)
}

func run(tb testing.TB, f func(tb testing.TB)) (failure string) {
	r := &recorder{TB: tb}
	defer func() {
		if p := recover(); p != nil {
			if p != r {
				panic(p)
			}
			failure = r.failed
		}
	}()
	f(r)
	return ""
}

func TestEventually(t *testing.T) {
	cases := []struct {
		name     string
		holdsAt  int32 // the call on which cond first holds; 0: never
		timeout  time.Duration
		wantFail string
	}{
		{"holds at once", 1, time.Second, ""},
		{"holds on the fifth poll", 5, time.Second, ""},
		{"never holds", 0, 50 * time.Millisecond, "timed out after 50ms waiting for the thing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			got := run(t, func(tb testing.TB) {
				Eventually(tb, tc.timeout, "the thing", func() bool {
					return calls.Add(1) == tc.holdsAt
				})
			})
			if got != tc.wantFail {
				t.Fatalf("failure %q, want %q", got, tc.wantFail)
			}
			if tc.holdsAt > 0 && calls.Load() != tc.holdsAt {
				t.Fatalf("cond called %d times, want %d", calls.Load(), tc.holdsAt)
			}
		})
	}
}

func TestUntilReportsLastReason(t *testing.T) {
	n := 0
	got := run(t, func(tb testing.TB) {
		Until(tb, 30*time.Millisecond, "ready", func() (bool, string) {
			n++
			return false, fmt.Sprintf("attempt %d", n)
		})
	})
	want := fmt.Sprintf("timed out after 30ms waiting for ready: attempt %d", n)
	if got != want {
		t.Fatalf("failure %q, want %q", got, want)
	}
}

func TestFreeAddrIsListenable(t *testing.T) {
	addr := FreeAddr(t)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("FreeAddr = %q, want a loopback address", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	l.Close()
}
