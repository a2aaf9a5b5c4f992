package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// TestGroupConsumersFollowLeaderChange is item 16 of issue 31: a consumer
// stream relayed through a follower must survive a leader change,
// attaching to the new leader without ending (docs/api.md, "Who
// delivers"). A consumer is attached through each member; then the leader
// is killed, or cut off from both followers (as a paused leader is) with
// an ack's progress save in flight, so that it loses leadership in the
// middle of the save, and healed. Every consumer on a member still running
// must still be consuming, attached to the new leader, and get the
// messages written after the change; none may have ended, with "no
// leader" or the old leader's failed save.
func TestGroupConsumersFollowLeaderChange(t *testing.T) {
	for _, tc := range []struct {
		name, fault string
		// idle: the consumers get nothing but heartbeats, for longer than
		// LeaderWait, before the fault.
		idle bool
	}{
		{"leader killed", "leader killed", false},
		{"leader cut off", "leader cut off", false},
		{"idle consumers, leader killed", "leader killed", true},
	} {
		fault := tc.fault
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, func(cfg *Config) {
				cfg.GroupHeartbeat = 200 * time.Millisecond
				if tc.idle {
					cfg.LeaderWait = 2 * time.Second
				}
				if fault == "leader cut off" {
					// A paused leader wakes up with its timers expired: its
					// save fails before it learns it lost leadership. Here
					// the save's timeout comes well before the leader's
					// lease runs out.
					cfg.Timing = Timing{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: time.Second, CommitTimeout: 5 * time.Millisecond}
					cfg.ApplyTimeout = 300 * time.Millisecond
				}
			})
			l := c.Leader()
			createNamespace(t, l.Node, "app")
			if _, err := l.CreateGroup(ctxT(t), &fsmv1.CreateGroup{Namespace: "app", Name: "g", Source: &fsmv1.GroupSource{Category: "job"},
				Settings: &fsmv1.GroupSettings{CheckpointAfter: 1, MaxInFlightPerConsumer: 1}}); err != nil {
				t.Fatal(err)
			}
			type consumer struct {
				tn    *TestNode
				got   chan nodeapi.GroupDelivery
				beats atomic.Int64
				done  chan error
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			t.Cleanup(func() { cancel(); wg.Wait() })
			consumers := make([]*consumer, len(c.Nodes))
			for i, tn := range c.Nodes {
				cs := &consumer{tn: tn, got: make(chan nodeapi.GroupDelivery, 100), done: make(chan error, 1)}
				consumers[i] = cs
				n := tn.Node
				wg.Add(1)
				go func() {
					defer wg.Done()
					cs.done <- n.Consume(ctx, "app", "g", fmt.Sprintf("c%d", i), func(d nodeapi.GroupDelivery) error {
						cs.got <- d
						return nil
					}, func() error { cs.beats.Add(1); return nil })
				}()
			}
			testutil.Eventually(t, waitTimeout, "three consumers attached", func() bool {
				st, ok := l.GroupStats(context.Background(), "app", "g")
				return ok && st.Consumers == 3
			})
			held := map[*consumer]nodeapi.GroupDelivery{}
			if tc.idle {
				testutil.Eventually(t, waitTimeout, "heartbeats for longer than LeaderWait", func() bool {
					for _, cs := range consumers {
						if cs.beats.Load() < 15 { // 3 s of 200 ms
							return false
						}
					}
					return true
				})
			}
			if !tc.idle {
				// One message to each consumer (one in flight each), unacked.
				for i := range 3 {
					if _, err := appendOne(ctxT(t), l.Node, "app", fmt.Sprintf("job-%d", i), ""); err != nil {
						t.Fatal(err)
					}
				}
				for _, cs := range consumers {
					select {
					case d := <-cs.got:
						held[cs] = d
					case err := <-cs.done:
						t.Fatalf("consumer on %s ended: %v", cs.tn.ID(), err)
					case <-time.After(waitTimeout):
						t.Fatalf("consumer on %s: no delivery", cs.tn.ID())
					}
				}
			}

			oldLeader := l
			acked := int64(0) // an ack whose save may or may not have committed
			switch fault {
			case "leader killed":
				// As a crash: its connections drop before anything of it
				// can say goodbye.
				l.Proxy.SetBlocked(true)
				l.Kill()
			case "leader cut off":
				// Cut the leader from both followers (their Raft traffic
				// between them too, so no one is elected meanwhile), ack
				// one message so that a progress save is proposed and cannot
				// commit, and let the leader step down under it.
				for _, f := range c.Followers() {
					f.Proxy.SetBlocked(true)
				}
				var mine *consumer
				for _, cs := range consumers {
					if cs.tn == l {
						mine = cs
					}
				}
				acked = held[mine].Message.GlobalPosition
				if err := l.Settle(ctxT(t), "app", "g", []string{held[mine].Message.ID}, nodeapi.SettleAck, ""); err != nil {
					t.Fatalf("ack on the cut-off leader: %v", err)
				}
				testutil.Eventually(t, waitTimeout, "the cut-off leader to step down", func() bool { return !l.IsLeader() })
				for _, tn := range c.Nodes {
					tn.Proxy.SetBlocked(false)
				}
			}
			nl := c.Leader()
			var alive []*consumer
			for _, cs := range consumers {
				if cs.tn.Node != nil {
					alive = append(alive, cs)
				}
			}
			testutil.Until(t, waitTimeout, "every consumer attached to the new leader", func() (bool, string) {
				for _, cs := range alive {
					select {
					case err := <-cs.done:
						t.Fatalf("consumer on %s (old leader: %v) ended with %v, want it attached to the new leader", cs.tn.ID(), cs.tn == oldLeader, err)
					default:
					}
				}
				st, ok := nl.GroupStats(context.Background(), "app", "g")
				return ok && st.Consumers == len(alive), fmt.Sprintf("new leader's group state %+v (%v), want %d consumers", st, ok, len(alive))
			})
			// Everything unacked is delivered again by the new leader, and
			// what is written next reaches the same streams.
			for i := range 3 {
				if _, err := appendOne(ctxT(t), nl.Node, "app", fmt.Sprintf("job-%d", 10+i), ""); err != nil {
					t.Fatal(err)
				}
			}
			total := int64(len(held) + 3)
			seen := map[int64]bool{}
			want := func() bool {
				for gp := int64(1); gp <= total; gp++ {
					if !seen[gp] && gp != acked {
						return false
					}
				}
				return true
			}
			deadline := time.After(waitTimeout)
			for !want() {
				progressed := false
				for _, cs := range alive {
					select {
					case d := <-cs.got:
						seen[d.Message.GlobalPosition] = true
						// A delivery the old leader made just before it
						// stepped down is not the new leader's to settle.
						var nif *nodeapi.NotInFlightError
						if err := nl.Settle(ctxT(t), "app", "g", []string{d.Message.ID}, nodeapi.SettleAck, ""); err != nil && !errors.As(err, &nif) {
							t.Fatalf("ack %d on the new leader: %v", d.Message.GlobalPosition, err)
						}
						progressed = true
					case err := <-cs.done:
						t.Fatalf("consumer on %s ended with %v", cs.tn.ID(), err)
					default:
					}
				}
				if !progressed {
					select {
					case <-deadline:
						t.Fatalf("delivered %v of messages 1-%d (%d acked before) after the leader change", seen, total, acked)
					case <-time.After(10 * time.Millisecond):
					}
				}
			}
		})
	}
}
