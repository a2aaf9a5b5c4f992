package transport

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/internal/testutil"
)

// Servers' Raft addresses become the remote IPs their connections come
// from, each server counted once per IP, in remoteIP's text form.
func TestMemberIPs(t *testing.T) {
	cases := []struct {
		name    string
		servers map[raft.ServerID][]string
		want    map[string]int
	}{
		{"three members behind loopback", map[raft.ServerID][]string{
			"a": {"127.0.0.1:7001"}, "b": {"127.0.0.1:7002"}, "c": {"127.0.0.1:7003"},
		}, map[string]int{"127.0.0.1": 3}},
		{"the configuration and membership agree", map[raft.ServerID][]string{
			"a": {"10.0.0.1:7000", "10.0.0.1:7000"},
		}, map[string]int{"10.0.0.1": 1}},
		{"membership reports a new address", map[raft.ServerID][]string{
			"a": {"10.0.0.1:7000", "10.0.0.2:7000"}, "b": {"10.0.0.2:7000"},
		}, map[string]int{"10.0.0.1": 1, "10.0.0.2": 2}},
		{"IPv6, and IPv4 written as IPv6", map[raft.ServerID][]string{
			"a": {"[::1]:7000"}, "b": {"[::ffff:10.0.0.3]:7000"},
		}, map[string]int{"::1": 1, "10.0.0.3": 1}},
		{"a name whose lookup fails keeps its last answer", map[raft.ServerID][]string{
			"a": {"resolved-once.invalid:7000"},
		}, map[string]int{"10.0.0.9": 1}},
		{"a name never resolved, and no address at all", map[raft.ServerID][]string{
			"a": {"never.invalid:7000"}, "b": {"not-an-address"}, "c": {":7000"},
		}, map[string]int{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &memberResolver{names: map[string][]string{"resolved-once.invalid": {"10.0.0.9"}}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if got := r.memberIPs(ctx, tc.servers); !maps.Equal(got, tc.want) {
				t.Fatalf("memberIPs = %v, want %v", got, tc.want)
			}
		})
	}
}

type fixedMembers map[raft.ServerID][]string

func (m fixedMembers) KnownServers() map[raft.ServerID][]string { return m }

// A port keeping reservations reserves for the members' addresses, and
// stops when its context ends.
func TestKeepReservations(t *testing.T) {
	p := newTestPort(t, testClusterSecret)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.KeepReservations(ctx, fixedMembers{"a": {"127.0.0.1:7001"}, "b": {"10.0.0.2:7000"}})
	}()
	want := map[string]int{"127.0.0.1": 1, "10.0.0.2": 1}
	testutil.Until(t, waitTimeout, "the port to reserve for its members", func() (bool, string) {
		got := p.Reservations()
		return maps.Equal(got, want), fmt.Sprintf("reserves for %v", got)
	})
	cancel()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("KeepReservations did not return after its context ended")
	}
}
