package rpc

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

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

// BenchmarkRPCCallers is the API path under concurrent callers, as the
// Go client and skald bench make it: 16 callers over one node, through
// connect-go's Connect protocol (binary) either with one HTTP/1.1
// connection per caller or multiplexed over one h2c connection, as the
// Go client's transport does. "read1" reads one message at LOCAL (no Raft
// round trip: the HTTP path and the handler), "append" appends one
// 200-byte message. cpu-ns/op is the whole process's CPU (server and
// client) per call, which a shared host distorts less than time.
//
//	go test -run '^$' -bench RPCCallers -count 6 ./rpc
func BenchmarkRPCCallers(b *testing.B) {
	s := single(b)
	ctx := context.Background()
	data := []byte(`{"note":"` + strings.Repeat("x", 180) + `"}`)
	appendReq := &skaldv1.AppendRequest{Stream: "account-1", Messages: []*skaldv1.NewMessage{{Type: "Deposited", Data: data}}}
	readReq := &skaldv1.ReadStreamRequest{Stream: "account-1", Limit: 1, Read: &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LOCAL}}
	for _, tr := range []struct {
		name string
		http func() *http.Client
	}{
		{"h1", func() *http.Client { return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}} }},
		{"h2c", h2c},
	} {
		c := newClients(s, protocol{name: tr.name, http: tr.http}, adminToken)
		if _, err := c.events.Append(ctx, connect.NewRequest(appendReq)); err != nil {
			b.Fatal(err)
		}
		for _, call := range []struct {
			name string
			do   func() error
		}{
			{"read1", func() error {
				r, err := c.events.ReadStream(ctx, connect.NewRequest(readReq))
				if err == nil && len(r.Msg.Messages) != 1 {
					err = fmt.Errorf("read %d messages, want 1", len(r.Msg.Messages))
				}
				return err
			}},
			{"append", func() error {
				_, err := c.events.Append(ctx, connect.NewRequest(appendReq))
				return err
			}},
		} {
			b.Run(tr.name+"/"+call.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(8) // 16 callers on 2 cores
				cpu0 := processCPU(b)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := call.do(); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the CPU time (user and system) this process has spent.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkObserveCode is the RPC metrics' work per call: one counter and
// one histogram series of a procedure and code.
//
//	go test -run '^$' -bench ObserveCode -count 6 ./rpc
func BenchmarkObserveCode(b *testing.B) {
	m := newRPCMetrics(prometheus.NewRegistry())
	start := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		m.observeCode("eventodb/stream.write", "ok", start)
	}
}
