package rpc

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// The API benchmarks call one real node over loopback HTTP/1.1 with the
// Connect protocol (binary), as a client library does: they measure what
// the API layer adds (authentication, limits, encoding) on top of a read
// or a write. Run them with
// go test -run '^$' -bench 'RPC' -count 6 ./rpc.

// BenchmarkRPCReadStream100 reads a 100-message stream (200-byte data) at
// LOCAL consistency, so the read index round trip does not dominate.
func BenchmarkRPCReadStream100(b *testing.B) {
	s := single(b)
	c := newClients(s, protocols[1], adminToken)
	ctx := context.Background()
	data := []byte(`{"note":"` + strings.Repeat("x", 180) + `"}`)
	msgs := make([]*skaldv1.NewMessage, 100)
	for i := range msgs {
		msgs[i] = &skaldv1.NewMessage{Type: "Deposited", Data: data}
	}
	if _, err := c.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: "account-1", Messages: msgs})); err != nil {
		b.Fatal(err)
	}
	req := &skaldv1.ReadStreamRequest{Stream: "account-1", Limit: 100, Read: &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LOCAL}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := c.events.ReadStream(ctx, connect.NewRequest(req))
		if err != nil || len(r.Msg.Messages) != 100 {
			b.Fatalf("read: %d messages, %v", len(r.Msg.GetMessages()), err)
		}
	}
}

// BenchmarkRPCAppend appends one 200-byte message per call, one caller at
// a time: the write path end to end on one node (Raft, fsync, apply).
func BenchmarkRPCAppend(b *testing.B) {
	s := single(b)
	c := newClients(s, protocols[1], adminToken)
	ctx := context.Background()
	data := []byte(`{"note":"` + strings.Repeat("x", 180) + `"}`)
	req := &skaldv1.AppendRequest{Stream: "account-1", Messages: []*skaldv1.NewMessage{{Type: "Deposited", Data: data}}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.events.Append(ctx, connect.NewRequest(req)); err != nil {
			b.Fatal(err)
		}
	}
}
