package transport

import (
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Replication is synchronous: the transport refuses a pipeline, so Raft
// never runs the pipelined replication that can deadlock (raft.go).
func TestReplicationNotPipelined(t *testing.T) {
	tr := OpenRaft(newTestPort(t, testClusterSecret), RaftOptions{Addrs: noAddrs{}, NetLog: hclog.NewNullLogger()})
	defer tr.Close()
	p, err := tr.AppendEntriesPipeline("n2", "127.0.0.1:1")
	if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("AppendEntriesPipeline: %v, want ErrPipelineReplicationNotSupported", err)
	}
}
