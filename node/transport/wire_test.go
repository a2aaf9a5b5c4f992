package transport

import (
	"bytes"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/internal/testutil"
)

// raftEnd is one side of a Raft transport test: a transport of this
// version (skald-raft/2 and /1) or of the version before (hashicorp/raft's
// NetworkTransport on a port offering skald-raft/1 only), answering every
// AppendEntries from its Consumer and keeping what it received.
type raftEnd struct {
	trans raft.Transport
	wire  *binaryWire // nil for the older version

	mu  sync.Mutex
	got []*raft.AppendEntriesRequest
}

func newRaftEnd(t *testing.T, upgraded bool) *raftEnd {
	t.Helper()
	port := newTestPort(t, testClusterSecret)
	e := &raftEnd{}
	if upgraded {
		tr := OpenRaft(
			port,
			RaftOptions{Addrs: noAddrs{}, NetLog: hclogFor(testutil.Logger(t), "raft-net"), Log: testutil.Logger(t)},
		)
		if tr.wire == nil {
			t.Fatal("OpenRaft made no skald-raft/2 wire")
		}
		e.trans, e.wire = tr, tr.wire
	} else {
		e.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: port, MaxPool: 1, Timeout: 5 * time.Second, Logger: hclogFor(testutil.Logger(t), "old"),
		})
	}
	t.Cleanup(func() { e.trans.(raft.WithClose).Close() })
	go func() {
		for rpc := range e.trans.Consumer() {
			req, ok := rpc.Command.(*raft.AppendEntriesRequest)
			if !ok {
				rpc.Respond(nil, errors.New("test: not AppendEntries"))
				continue
			}
			e.mu.Lock()
			e.got = append(e.got, req)
			e.mu.Unlock()
			if req.Term == 99 {
				rpc.Respond(&raft.AppendEntriesResponse{Term: 99}, errors.New("unable to store logs: test refusal"))
				continue
			}
			var last uint64
			if n := len(req.Entries); n > 0 {
				last = req.Entries[n-1].Index
			}
			rpc.Respond(
				&raft.AppendEntriesResponse{
					RPCHeader:      raft.RPCHeader{ID: []byte("follower")},
					Term:           req.Term,
					LastLog:        last,
					Success:        true,
					NoRetryBackoff: true,
				},
				nil,
			)
		}
	}()
	return e
}

func (e *raftEnd) received() []*raft.AppendEntriesRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*raft.AppendEntriesRequest(nil), e.got...)
}

// An upgraded node speaks skald-raft/2 to an upgraded peer, and still
// speaks to a node of the version before in either direction (a rolling
// upgrade): every request arrives whole and every answer comes back,
// including Raft's errors.
func TestRaftWireInteroperates(t *testing.T) {
	cases := []struct {
		name             string
		client, server   bool // upgraded
		wantBinary       bool // the server answered over skald-raft/2
		wantClientLegacy bool // the client marked the server legacy
	}{
		{"upgraded to upgraded", true, true, true, false},
		{"upgraded to older", true, false, false, true},
		{"older to upgraded", false, true, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client, server := newRaftEnd(t, tc.client), newRaftEnd(t, tc.server)
			target := server.trans.LocalAddr()
			var sent []*raft.AppendEntriesRequest
			for _, c := range appendEntriesCases() {
				if len(c.req.Entries) > 0 && len(c.req.Entries[0].Data) > 1<<16 {
					continue // keep the runs short: the round-trip test has it
				}
				var resp raft.AppendEntriesResponse
				if err := client.trans.AppendEntries("follower", target, c.req, &resp); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				var last uint64
				if n := len(c.req.Entries); n > 0 {
					last = c.req.Entries[n-1].Index
				}
				want := raft.AppendEntriesResponse{
					RPCHeader:      raft.RPCHeader{ID: []byte("follower")},
					Term:           c.req.Term,
					LastLog:        last,
					Success:        true,
					NoRetryBackoff: true,
				}
				if !reflect.DeepEqual(resp, want) {
					t.Fatalf("%s: answer %+v, want %+v", c.name, resp, want)
				}
				sent = append(sent, c.req)
			}
			var resp raft.AppendEntriesResponse
			err := client.trans.AppendEntries("follower", target, &raft.AppendEntriesRequest{Term: 99}, &resp)
			if err == nil || err.Error() != "unable to store logs: test refusal" || resp.Term != 99 {
				t.Fatalf("refused request: err %v, term %d; want Raft's error and term 99", err, resp.Term)
			}
			got := server.received()
			if len(got) != len(sent)+1 {
				t.Fatalf("server received %d requests, want %d", len(got), len(sent)+1)
			}
			for i, want := range sent {
				sameTimes(t, want.Entries, got[i].Entries)
				for j := range want.Entries {
					// msgpack decodes an empty byte string as nil.
					if len(want.Entries[j].Data) == 0 && len(got[i].Entries[j].Data) == 0 {
						got[i].Entries[j].Data = want.Entries[j].Data
					}
					if len(want.Entries[j].Extensions) == 0 && len(got[i].Entries[j].Extensions) == 0 {
						got[i].Entries[j].Extensions = want.Entries[j].Extensions
					}
				}
				if !requestsEqual(got[i], want) {
					t.Fatalf("request %d arrived as %+v, want %+v", i, got[i], want)
				}
			}
			if server.wire != nil {
				wantServed := uint64(0)
				if tc.wantBinary {
					wantServed = uint64(len(sent) + 1)
				}
				if n := server.wire.served.Load(); n != wantServed {
					t.Fatalf("server answered %d requests over skald-raft/2, want %d", n, wantServed)
				}
			}
			if client.wire != nil {
				if l := client.wire.isLegacy(target); l != tc.wantClientLegacy {
					t.Fatalf("client holds the server legacy: %v, want %v", l, tc.wantClientLegacy)
				}
			}
		})
	}
}

// requestsEqual compares two requests, their entries' bytes by value.
func requestsEqual(a, b *raft.AppendEntriesRequest) bool {
	ea, eb := a.Entries, b.Entries
	ca, cb := *a, *b
	ca.Entries, cb.Entries = nil, nil
	if len(ca.Leader) == 0 && len(cb.Leader) == 0 {
		ca.Leader, cb.Leader = nil, nil
	}
	if !reflect.DeepEqual(ca, cb) || len(ea) != len(eb) {
		return false
	}
	for i := range ea {
		x, y := *ea[i], *eb[i]
		if !bytes.Equal(x.Data, y.Data) || !bytes.Equal(x.Extensions, y.Extensions) {
			return false
		}
		x.Data, y.Data, x.Extensions, y.Extensions = nil, nil, nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// A peer held legacy is offered skald-raft/2 again once legacyRecheck
// has passed, so a cluster uses the binary framing everywhere after its
// last node is upgraded.
func TestRaftWireRechecksLegacyPeer(t *testing.T) {
	client := newRaftEnd(t, true)
	old := newRaftEnd(t, false)
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("leader")}, Term: 1}
	var resp raft.AppendEntriesResponse
	if err := client.trans.AppendEntries("peer", old.trans.LocalAddr(), req, &resp); err != nil {
		t.Fatal(err)
	}
	if !client.wire.isLegacy(old.trans.LocalAddr()) {
		t.Fatalf("the older peer is not held legacy")
	}
	var mu sync.Mutex
	now := time.Now().Add(legacyRecheck + time.Second)
	client.wire.mu.Lock()
	client.wire.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	client.wire.mu.Unlock()
	if client.wire.isLegacy(old.trans.LocalAddr()) {
		t.Fatalf("still legacy after legacyRecheck")
	}
	// The peer answers skald-raft/1 again, so it is held legacy again and
	// the request still goes through.
	if err := client.trans.AppendEntries("peer", old.trans.LocalAddr(), req, &resp); err != nil || !resp.Success {
		t.Fatalf("after the recheck: %v, success %v", err, resp.Success)
	}
	if !client.wire.isLegacy(old.trans.LocalAddr()) {
		t.Fatalf("the older peer is not held legacy after the recheck")
	}
	if n := len(old.received()); n != 2 {
		t.Fatalf("older peer received %d requests, want 2", n)
	}
}

// A peer held legacy that has been upgraded by the time of its recheck
// gets skald-raft/2 from then on.
func TestRaftWireSwitchesOnceLegacyPeerUpgraded(t *testing.T) {
	client, upgraded := newRaftEnd(t, true), newRaftEnd(t, true)
	addr := upgraded.trans.LocalAddr()
	client.wire.mu.Lock()
	client.wire.legacy[addr] = time.Now().Add(-time.Second) // held legacy, recheck due
	client.wire.mu.Unlock()
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("leader")}, Term: 1}
	for i := range 3 {
		var resp raft.AppendEntriesResponse
		if err := client.trans.AppendEntries("peer", addr, req, &resp); err != nil || !resp.Success {
			t.Fatalf("request %d: %v, success %v", i, err, resp.Success)
		}
	}
	if client.wire.isLegacy(addr) {
		t.Fatalf("the upgraded peer is still held legacy")
	}
	if n := upgraded.wire.served.Load(); n != 3 {
		t.Fatalf("upgraded peer answered %d requests over skald-raft/2, want 3", n)
	}
}
