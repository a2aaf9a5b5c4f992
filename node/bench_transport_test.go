package node

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkTransportAppendEntries measures one AppendEntries round trip of
// 64 entries of 300 bytes (a loaded leader's batch) over hashicorp/raft's
// plain TCP transport and over the cluster port's mutual TLS, both on
// loopback with a follower that answers at once: what authentication and
// encryption add to replication, per batch.
//
//	go test -run '^$' -bench TransportAppendEntries -count 6 ./node
func BenchmarkTransportAppendEntries(b *testing.B) {
	entries := make([]*raft.Log, 64)
	for i := range entries {
		entries[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: make([]byte, 300)}
	}
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("leader"), Addr: []byte("127.0.0.1:1")},
		Term:      1, Entries: entries, LeaderCommitIndex: 64,
	}
	transports := []struct {
		name string
		open func(b *testing.B) *raft.NetworkTransport
	}{
		{"plain-tcp", func(b *testing.B) *raft.NetworkTransport {
			t, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 10*time.Second, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			return t
		}},
		{"mutual-tls", func(b *testing.B) *raft.NetworkTransport {
			return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: newTestPort(b, testClusterSecret), MaxPool: 1, Timeout: 10 * time.Second})
		}},
	}
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			server := tr.open(b)
			defer server.Close()
			go func() {
				for rpc := range server.Consumer() {
					rpc.Respond(&raft.AppendEntriesResponse{Term: 1, LastLog: 64, Success: true}, nil)
				}
			}()
			client := tr.open(b)
			defer client.Close()
			var resp raft.AppendEntriesResponse
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := client.AppendEntries("follower", server.LocalAddr(), req, &resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
