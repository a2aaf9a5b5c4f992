package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
)

// TestErrorsNameTheNodeOnce calls a port nothing listens on (a real
// dial, no server needed) in each way a call can fail there: every error
// names the member once, in the dial error or in parentheses, not both
// (issue 32 item 7), and still names it.
func TestErrorsNameTheNodeOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	newClient := func(cfg Config) *Client {
		cfg.Endpoints, cfg.Token = []string{dead}, "t"
		c, err := New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	failFast := newClient(Config{Pinned: true, FailFast: true})
	unary := newClient(Config{Pinned: true, FailFast: true, AppendStreams: -1})
	patient := newClient(Config{Pinned: true})
	msg := []NewMessage{{Type: "Placed", Data: []byte(`{}`)}}
	for _, tc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"append over a stream", func(ctx context.Context) error { _, err := failFast.Append(ctx, "order-1", msg); return err }},
		{"unary append", func(ctx context.Context) error { _, err := unary.Append(ctx, "order-1", msg); return err }},
		{"read", func(ctx context.Context) error {
			_, err := failFast.ReadStream(ctx, StreamQuery{Stream: "order-1"})
			return err
		}},
		{"read until the deadline", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			_, err := patient.ReadStream(ctx, StreamQuery{Stream: "order-1"})
			return err
		}},
		{"append until the deadline", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			_, err := patient.Append(ctx, "order-1", msg)
			return err
		}},
	} {
		err := tc.call(ctx)
		if err == nil {
			t.Fatalf("%s: no error from a dead endpoint", tc.name)
		}
		if n := strings.Count(err.Error(), dead); n != 1 {
			t.Errorf("%s: the error names %s %d times, want once: %v", tc.name, dead, n, err)
		}
	}

	// A cause that does not name the member: the parentheses do.
	refusal := &Error{Kind: ErrNotFound, Endpoint: "http://10.0.0.1:8080", Err: connect.NewWireError(connect.CodeNotFound, errors.New("namespace not found"))}
	if got, want := refusal.Error(), "skald: not found (http://10.0.0.1:8080): not_found: namespace not found"; got != want {
		t.Errorf("a server's refusal reads %q, want %q", got, want)
	}
}
