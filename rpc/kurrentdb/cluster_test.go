package kurrentdb

import (
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/gossip"
)

// TestCluster: on three nodes, Gossip names every member at its
// KurrentDB address with the leader as Leader, and a client on a
// follower appends (the node forwards the write) and reads its writes,
// with a single host or by discovery.
func TestCluster(t *testing.T) {
	f := start(t, 3, insecureMode)
	var follower *member
	for _, m := range f.members {
		if m != f.leader {
			follower = m
			break
		}
	}
	cl := insecureClient(t, follower)
	members, err := cl.Gossip(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, m := range members {
		ep := m.GetHttpEndPoint()
		got = append(got, fmt.Sprintf("%s %s alive=%t", net.JoinHostPort(ep.GetAddress(), fmt.Sprint(ep.GetPort())),
			m.GetState(), m.GetIsAlive()))
	}
	for _, m := range f.members {
		state := gossip.MemberInfo_Follower
		if m == f.leader {
			state = gossip.MemberInfo_Leader
		}
		want = append(want, fmt.Sprintf("%s %s alive=true", m.addr, state))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("gossip %v, want %v", got, want)
	}

	for i, c := range []struct {
		name string
		cl   *kurrentdb.Client
	}{
		{"single host on a follower", cl},
		{"discovery from a follower", discoverClient(t, follower)},
	} {
		stream := fmt.Sprintf("order-%d", i)
		res, err := c.cl.AppendToStream(ctxT(t), stream, kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.NoStream{}},
			jsonEvent("Placed", `{"n":1}`), jsonEvent("Paid", `{"n":2}`))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.NextExpectedVersion != 1 {
			t.Errorf("%s: next expected version %d, want 1", c.name, res.NextExpectedVersion)
		}
		evs, err := readStream(t, c.cl, stream, kurrentdb.ReadStreamOptions{}, 10)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := numbers(evs); !slices.Equal(got, []uint64{0, 1}) || evs[1].Event.Position.Commit != res.CommitPosition {
			t.Errorf("%s: read %v at %v, want [0 1] with the last at %d", c.name, got, globals(t, evs), res.CommitPosition)
		}
	}
}

// discoverClient is a client over h2c that discovers the cluster from
// seed's Gossip and talks to the member it picks (the leader).
func discoverClient(t *testing.T, seed *member) *kurrentdb.Client {
	t.Helper()
	cfg, err := kurrentdb.ParseConnectionString("kurrentdb+discover://" + seed.addr + "?tls=false")
	if err != nil {
		t.Fatal(err)
	}
	return dial(t, cfg)
}

// TestSubscriptionsOnFollower: a follower serves a catch-up subscription
// from its own state and a persistent subscription through the group's
// owner on the leader, events written through the leader arriving in
// order on both.
func TestSubscriptionsOnFollower(t *testing.T) {
	f := start(t, 3, insecureMode)
	var follower *member
	for _, m := range f.members {
		if m != f.leader {
			follower = m
			break
		}
	}
	leader, cl := insecureClient(t, f.leader), insecureClient(t, follower)
	appendN(t, leader, "order-1", 2)
	if err := cl.CreatePersistentSubscription(ctxT(t), "order-1", "billing", fromStart()); err != nil {
		t.Fatal(err)
	}
	sub, err := cl.SubscribeToStream(ctxT(t), "order-1", kurrentdb.SubscribeToStreamOptions{From: kurrentdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ps, err := cl.SubscribeToPersistentSubscription(ctxT(t), "order-1", "billing",
		kurrentdb.SubscribeToPersistentSubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	appendN(t, leader, "order-1", 2)
	d := &delivered{}
	until(t, sub, d, 4, false)
	if got := numbers(d.events); !slices.Equal(got, []uint64{0, 1, 2, 3}) {
		t.Errorf("catch-up on a follower: %v, want [0 1 2 3]", got)
	}
	var got []uint64
	for range 4 {
		e := next(t, ps)
		got = append(got, e.Event.OriginalEvent().EventNumber)
		if err := ps.Ack(e.Event); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, []uint64{0, 1, 2, 3}) {
		t.Errorf("persistent on a follower: %v, want [0 1 2 3]", got)
	}
}
