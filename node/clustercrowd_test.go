package node

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/transport"
)

// crowd holds half-open connections to a cluster port: from each of its
// source addresses, perIP connections that never send a ClientHello. A
// connection the port closes is dialed again at once, so the crowd takes
// back every slot the port frees; one refused at once (past a bound) is
// dialed again after a short pause, so a full port is asked all the time
// without the crowd spinning.
type crowd struct {
	target string
	held   atomic.Int64 // connections open and not yet closed by the port
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// startCrowd starts the crowd on target from 127.0.0.<first>..<first+ips-1>;
// the test's cleanup stops it. target may be down: the crowd waits for it.
func startCrowd(t *testing.T, target string, first, ips, perIP int) *crowd {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cr := &crowd{target: target, stop: cancel}
	for i := range ips {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(first+i))}
		for range perIP {
			cr.wg.Add(1)
			go cr.hold(ctx, src)
		}
	}
	t.Cleanup(cr.close)
	return cr
}

func (cr *crowd) hold(ctx context.Context, src *net.TCPAddr) {
	defer cr.wg.Done()
	d := net.Dialer{LocalAddr: src, Timeout: time.Second}
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", cr.target)
		if err != nil { // the port is down, or the dial was cancelled
			pause(ctx, 20*time.Millisecond)
			continue
		}
		cr.held.Add(1)
		opened := time.Now()
		stopRead := context.AfterFunc(ctx, func() { c.Close() })
		_, _ = c.Read(make([]byte, 1)) // the port sends nothing before a ClientHello: this ends at its close
		stopRead()
		c.Close()
		cr.held.Add(-1)
		if time.Since(opened) < 100*time.Millisecond { // refused at once, not timed out
			pause(ctx, 20*time.Millisecond)
		}
	}
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (cr *crowd) close() {
	cr.stop()
	cr.wg.Wait()
}

// catchUp waits up to 15 s for tn to apply index (Raft's entries that
// carry no state, such as barriers, count as applied), and fails the test
// with where tn stands past that.
func catchUp(t *testing.T, tn *TestNode, index uint64, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := tn.waitApplied(ctx, index); err != nil {
		t.Fatalf("%s: %s applied %d of %d: %v", what, tn.ID(), tn.AppliedIndex(), index, err)
	}
}

// A member must get its replication through a crowd of strangers holding
// every handshake the cluster port allows them, from 20 source addresses
// at the per-address bound each: after a restart, and after a partition
// heals, it catches up with the leader while the crowd holds. The members
// dial from 127.0.0.1, the address of the Raft configuration; the crowd
// from 127.0.0.2-21. The last case keeps the strangers' handshake
// deadline at its full length under pressure, so that the reservation of
// the members' address alone must let the member through.
func TestClusterPortMembersGetThroughACrowd(t *testing.T) {
	const ips, perIP = 20, 16
	cut := func(tn *TestNode) { tn.Proxy.SetBlocked(true) }
	heal := func(tn *TestNode) { tn.Proxy.SetBlocked(false) }
	cases := []struct {
		name        string
		cut, heal   func(*TestNode)
		fullTimeout bool // no shorter deadline for strangers under pressure
	}{
		{"restart", (*TestNode).Kill, (*TestNode).Restart, false},
		{"partition", cut, heal, false},
		{"partition, the strangers' deadline not shortened", cut, heal, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, nil)
			l := c.Leader()
			createNamespace(t, l.Node, "app")
			victim := c.Followers()[0]
			if tc.fullTimeout {
				victim.port.SetPressedTimeout(transport.HandshakeTimeout)
			}
			cr := startCrowd(t, victim.raftAddr, 2, ips, perIP)
			testutil.Until(t, testWait, "the crowd to fill the port", func() (bool, string) {
				n := cr.held.Load()
				return n >= transport.MaxHandshakes, fmt.Sprintf("%d held", n)
			})

			tc.cut(victim)
			writeN(t, l.Node, "app", 20) // while the member is down or cut off
			target := c.Leader().raft.LastIndex()
			tc.heal(victim)
			healed := time.Now()

			catchUp(t, victim, target, "the member behind the crowd")
			t.Logf("caught up %v after the %s, the crowd holding %d",
				time.Since(healed).Round(time.Millisecond), tc.name, cr.held.Load())
			if n := cr.held.Load(); n < transport.MaxHandshakes*3/4 {
				t.Fatalf("the crowd holds %d connections, want at least %d: the test did not crowd the port",
					n, transport.MaxHandshakes*3/4)
			}
		})
	}
}

// With the survivors' cluster ports crowded as above, killing the leader
// still elects another and commits a write on both survivors: the
// candidates' votes and the new leader's AppendEntries get through.
func TestClusterPortFailoverThroughACrowd(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	survivors := c.Others(l)
	var crowds []*crowd
	for _, tn := range survivors {
		cr := startCrowd(t, tn.raftAddr, 2, 20, 16)
		crowds = append(crowds, cr)
		testutil.Until(t, testWait, "the crowd to fill "+tn.ID()+"'s port", func() (bool, string) {
			n := cr.held.Load()
			return n >= transport.MaxHandshakes, fmt.Sprintf("%d held", n)
		})
	}

	l.Kill()
	var leader *TestNode
	attempt := 0
	testutil.Until(t, 15*time.Second, "a new leader to commit a write through the crowd", func() (bool, string) {
		for _, tn := range survivors {
			if !tn.IsLeader() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			attempt++
			if _, err := appendOne(ctx, tn.Node, "app", "s-1", fmt.Sprintf("after-failover-%d", attempt)); err != nil {
				return false, fmt.Sprintf("%s leads, append: %v", tn.ID(), err)
			}
			leader = tn
			return true, ""
		}
		return false, "no survivor leads"
	})
	target := leader.raft.LastIndex()
	for _, tn := range survivors {
		catchUp(t, tn, target, "a survivor behind the crowd")
	}
	for i, cr := range crowds {
		if n := cr.held.Load(); n < transport.MaxHandshakes*3/4 {
			t.Fatalf("the crowd on %s holds %d connections, want at least %d",
				survivors[i].ID(), n, transport.MaxHandshakes*3/4)
		}
	}
}
