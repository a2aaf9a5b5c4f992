package rpc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
)

// TestExpiryNanos: an expiry past what int64 nanoseconds hold is refused
// naming the range and the way to say "never", not wrapped into the past
// and refused as "must be in the future".
func TestExpiryNanos(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		at   string
		want int64 // when ok
		err  string
	}{
		{at: "2099-01-02T03:04:05Z", want: time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()},
		{at: "2262-04-11T23:47:16.854775807Z", want: 1<<63 - 1},
		{at: "9999-12-31T00:00:00Z", err: "outside the times Skald stores"},
		{at: "2262-04-11T23:47:16.854775808Z", err: "leave the expiry out for a credential that never expires"},
	} {
		at, err := time.Parse(time.RFC3339Nano, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		got, err := expiryNanos("expires_at", at)
		if tc.err == "" {
			if err != nil || got != tc.want {
				t.Errorf("expiryNanos(%s) = %d, %v; want %d", tc.at, got, err, tc.want)
			}
			continue
		}
		var v *fsm.ValidationError
		if !errors.As(err, &v) || v.Field != "expires_at" || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("expiryNanos(%s) = %d, %v; want a validation error of expires_at saying %q", tc.at, got, err, tc.err)
		}
	}
}
