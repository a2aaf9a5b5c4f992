package rpc

import (
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

// A write served by a follower names the leader's API address; reads do
// not, and neither does the leader.
func TestLeaderHintOnForwardedWrites(t *testing.T) {
	f := followerOfThree(t)
	c := newClients(f, protocols[1], adminToken)
	lid, _ := f.n.Leader()
	want, ok := f.n.NodeAddr(lid)
	if !ok {
		t.Fatal("the follower does not know the leader's API address")
	}
	resp, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "hint-1", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header().Get(LeaderHeader); got != want {
		t.Fatalf("%s = %q on a forwarded write, want the leader's %q", LeaderHeader, got, want)
	}
	read, err := c.events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "hint-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := read.Header().Get(LeaderHeader); got != "" {
		t.Fatalf("%s = %q on a read", LeaderHeader, got)
	}
	leader := &server{addr: want}
	lresp, err := newClients(leader, protocols[1], adminToken).events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "hint-1", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := lresp.Header().Get(LeaderHeader); got != "" {
		t.Fatalf("%s = %q on the leader's own write", LeaderHeader, got)
	}
}
