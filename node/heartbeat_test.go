package node

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// TestStaleLeaderNeverWritesNewerTerm replays, deterministically, the
// divergence a 5-node jepsen campaign found (hashicorp/raft#695): a leader
// of term T hears, as a heartbeat, of a newer term while its main loop sits
// idle; the proposal it takes next must not be written with the newer term.
// Written with it, the entry shares index and term with the real leader's
// entry there, so Raft never replaces it and the old leader applies a
// write nobody else has.
//
// The heartbeat here comes from an intruder with term T+100, which no node
// campaigns for (nodes that learn of it jump straight to it as followers
// and campaign at T+101), so no log may ever hold an entry of that term.
func TestStaleLeaderNeverWritesNewerTerm(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.Leader()
	createNamespace(t, leader.Node, "ns")
	term := leader.raft.CurrentTerm()
	intruderTerm := term + 100

	// The intruder holds the cluster's credentials (a member with a newer
	// term, as far as the leader can tell).
	client := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: newTestPort(t, testClusterSecret), MaxPool: 1, Timeout: 5 * time.Second,
	})
	defer client.Close()
	// A heartbeat is an AppendEntries with a term and a leader and nothing
	// else; the network transport recognizes exactly that shape.
	hb := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(client.LocalAddr())},
		Term:      intruderTerm,
	}
	var resp raft.AppendEntriesResponse
	if err := client.AppendEntries("intruder", raft.ServerAddress(leader.RaftAddr()), hb, &resp); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}

	// Propose as a leader does after it checked it leads: the check passed
	// before the heartbeat landed.
	data, err := fsm.EncodeCommand(&fsmv1.Command{Kind: &fsmv1.Command_Append{Append: &fsmv1.Append{
		Namespace: "ns", Stream: "s-1",
		Messages: []*fsmv1.NewMessage{{Id: "00000000-0000-4000-8000-000000000001", Type: "T", Data: []byte(`{}`)}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	f := leader.raft.Apply(data, 5*time.Second)
	applyErr := f.Error()

	// Whatever happens next (an election at a higher term), no node may
	// hold an entry of the intruder's term.
	c.Leader()
	for _, tn := range c.Nodes {
		first, err := tn.logs.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		last, err := tn.logs.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		for i := first; i <= last && i > 0; i++ {
			var l raft.Log
			if err := tn.logs.GetLog(i, &l); err != nil {
				continue // compacted meanwhile
			}
			if l.Term == intruderTerm {
				t.Fatalf("node %s holds entry %d of term %d, a term nobody led (leader was in term %d; its proposal returned %v)",
					tn.ID(), l.Index, l.Term, term, applyErr)
			}
		}
	}
	if applyErr == nil {
		t.Fatalf("the stale leader's proposal succeeded at index %d; want it refused", f.Index())
	}
}
