package rpc

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// encodingRecorder remembers the Content-Encoding of the last reply.
type encodingRecorder struct {
	mu   sync.Mutex
	last string
}

func (r *encodingRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		r.mu.Lock()
		r.last = resp.Header.Get("Content-Encoding")
		r.mu.Unlock()
	}
	return resp, err
}

// A 100-message read (about 20 KiB) goes out uncompressed by default even
// to a client that accepts gzip; CompressMinBytes lowers the bar.
func TestReplyCompression(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		min      int
		encoding string
	}{
		{"default leaves reads uncompressed", 0, ""},
		{"negative compresses every reply", -1, "gzip"},
		{"threshold below the reply", 4096, "gzip"},
		{"threshold above the reply", 64 << 10, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := singleWith(t, Options{CompressMinBytes: tc.min})
			rec := &encodingRecorder{}
			cl := newClients(s, protocol{name: "connect-proto", http: func() *http.Client { return &http.Client{Transport: rec} }}, adminToken).events
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			msgs := make([]*skaldv1.NewMessage, 100)
			for i := range msgs {
				msgs[i] = &skaldv1.NewMessage{Type: "T", Data: []byte(`{"p":"` + strings.Repeat("x", 190) + `"}`)}
			}
			if _, err := cl.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: "s-1", Messages: msgs})); err != nil {
				t.Fatal(err)
			}
			resp, err := cl.ReadStream(ctx, connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "s-1", Limit: 100}))
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Msg.Messages) != 100 {
				t.Fatalf("read %d messages, want 100", len(resp.Msg.Messages))
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if rec.last != tc.encoding {
				t.Fatalf("Content-Encoding %q, want %q", rec.last, tc.encoding)
			}
		})
	}
}
