package transport

import (
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// BenchmarkTransportAppendEntries measures one AppendEntries round trip
// over hashicorp/raft's plain TCP transport, over the cluster port's
// mutual TLS in hashicorp/raft's msgpack framing (skald-raft/1, what an
// older peer gets) and in skald-raft/2's binary framing (wire.go),
// all on loopback with a follower that answers at once. Batches: 64
// entries of 300 bytes (a loaded leader's), 4 (8 callers), and none (a
// heartbeat). ns/op is the wall time of a round trip; cpu-ns/op is the
// process's CPU (both ends) per round trip, the figure that matters on a
// loaded node.
//
//	go test -run '^$' -bench TransportAppendEntries -count 6 ./node/transport
func BenchmarkTransportAppendEntries(b *testing.B) {
	transports := []struct {
		name string
		open func(b *testing.B) raft.Transport
	}{
		{"plain-tcp", func(b *testing.B) raft.Transport {
			t, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 10*time.Second, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			return t
		}},
		{"mutual-tls-msgpack", func(b *testing.B) raft.Transport {
			return raft.NewNetworkTransportWithConfig(
				&raft.NetworkTransportConfig{
					Stream:  newTestPort(b, testClusterSecret),
					MaxPool: 1,
					Timeout: 10 * time.Second,
				},
			)
		}},
		{"mutual-tls-binary", func(b *testing.B) raft.Transport {
			return OpenRaft(
				newTestPort(b, testClusterSecret),
				RaftOptions{Addrs: noAddrs{}, NetLog: hclog.NewNullLogger()},
			)
		}},
	}
	for _, n := range []int{64, 4, 0} {
		entries := make([]*raft.Log, n)
		for i := range entries {
			entries[i] = &raft.Log{
				Index:      uint64(i + 1),
				Term:       1,
				Type:       raft.LogCommand,
				Data:       make([]byte, 300),
				AppendedAt: time.Now(),
			}
		}
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{
				ProtocolVersion: raft.ProtocolVersionMax,
				ID:              []byte("leader"),
				Addr:            []byte("127.0.0.1:1"),
			},
			Term: 1, Entries: entries, LeaderCommitIndex: uint64(n),
		}
		for _, tr := range transports {
			b.Run(fmt.Sprintf("entries=%d/%s", n, tr.name), func(b *testing.B) {
				server := tr.open(b)
				defer server.(raft.WithClose).Close()
				go func() {
					for rpc := range server.Consumer() {
						rpc.Respond(&raft.AppendEntriesResponse{Term: 1, LastLog: uint64(n), Success: true}, nil)
					}
				}()
				client := tr.open(b)
				defer client.(raft.WithClose).Close()
				var resp raft.AppendEntriesResponse
				b.ReportAllocs()
				cpu0 := processCPU(b)
				b.ResetTimer()
				for range b.N {
					if err := client.AppendEntries("follower", server.LocalAddr(), req, &resp); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU returns the CPU time, user and system, the process has
// used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
