package membership

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node"
)

var _ Node = (*node.Node)(nil)

const waitTimeout = 30 * time.Second

var testKey = []byte("0123456789abcdef0123456789abcdef")

// member is one node with its API server and membership.
type mnode struct {
	t      *testing.T
	dir    string
	n      *node.Node
	m      *Membership
	srv    *http.Server
	gossip string
	mod    func(*Config)
	cfg    Config // of the last start
}

// start opens the node on fresh ports (retrying when another test binary
// took a port between picking and binding it) and starts membership.
func (mn *mnode) start(expect int, join []string) {
	t := mn.t
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := ln.Addr().String()
	var n *node.Node
	for attempt := 0; ; attempt++ {
		n, err = node.Open(node.Config{DataDir: mn.dir, RaftAddr: testutil.FreeAddr(t), APIAddr: api, ClusterSecret: "membership-test",
			Timing: node.FastTiming, LeaderWait: 10 * time.Second})
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "address already in use") || attempt > 20 {
			t.Fatal(err)
		}
	}
	mn.srv = &http.Server{Handler: http.NotFoundHandler()}
	go mn.srv.Serve(ln)
	var m *Membership
	for attempt := 0; ; attempt++ {
		mn.gossip = testutil.FreeAddr(t)
		cfg := Config{GossipAddr: mn.gossip, Join: join, BootstrapExpect: expect, Key: testKey, RaftAddr: n.RaftAddr(), APIAddr: api,
			Local: true, CleanupDeadServers: true, MinQuorum: 3, Logger: testutil.Logger(mn.t)}
		if mn.mod != nil {
			mn.mod(&cfg)
		}
		if m, err = Start(n, cfg); err == nil {
			mn.cfg = cfg
			break
		}
		if attempt > 20 {
			t.Fatal(err)
		}
	}
	mn.n, mn.m = n, m
}

// kill stops the node without leaving: the others see it fail.
func (mn *mnode) kill() {
	if mn.n == nil {
		return
	}
	mn.m.Close()
	mn.srv.Close()
	mn.n.Close()
	mn.n = nil
}

func newNode(t *testing.T) *mnode {
	mn := &mnode{t: t, dir: t.TempDir()}
	t.Cleanup(mn.kill)
	return mn
}

// voters returns the ids of the voters in n's configuration.
func voters(n *node.Node) map[string]bool {
	servers, err := n.Servers()
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			out[string(s.ID)] = true
		}
	}
	return out
}

// theLeader waits for one of nodes to lead and returns it: between two
// checks, leadership may be moving (an election under -race on a loaded
// machine), and leaderOf answers nil.
func theLeader(t *testing.T, nodes []*mnode) *mnode {
	t.Helper()
	var l *mnode
	testutil.Eventually(t, waitTimeout, "a leader", func() bool { l = leaderOf(nodes); return l != nil })
	return l
}

func leaderOf(nodes []*mnode) *mnode {
	for _, mn := range nodes {
		if mn.n != nil && mn.n.IsLeader() {
			return mn
		}
	}
	return nil
}

// formCluster starts three nodes with bootstrap-expect 3 that join the
// first, and waits for one leader with three voters.
func formCluster(t *testing.T) []*mnode {
	nodes := []*mnode{newNode(t), newNode(t), newNode(t)}
	nodes[0].start(3, nil)
	for _, mn := range nodes[1:] {
		mn.start(3, []string{nodes[0].gossip})
	}
	testutil.Eventually(t, waitTimeout, "one leader with three voters", func() bool {
		l := leaderOf(nodes)
		return l != nil && len(voters(l.n)) == 3
	})
	return nodes
}

func TestBootstrapExpectJoinPromoteLeave(t *testing.T) {
	nodes := formCluster(t)
	l := theLeader(t, nodes)
	for _, mn := range nodes {
		if !voters(l.n)[mn.n.ID()] {
			t.Fatalf("node %s is not a voter", mn.n.ID())
		}
		testutil.Eventually(t, waitTimeout, "every node to know the leader", func() bool { id, _ := mn.n.Leader(); return id == l.n.ID() })
	}
	// Writes work through any node (forwarding uses the registered API addresses).
	if _, err := nodes[2].n.CreateNamespace(context.Background(), &fsmv1.CreateNamespace{Name: "app"}); err != nil {
		t.Fatal(err)
	}

	// A fourth node joins, is added as a non-voter and promoted.
	fourth := newNode(t)
	fourth.start(3, []string{nodes[1].gossip})
	testutil.Eventually(t, waitTimeout, "the fourth node to be promoted to voter", func() bool {
		l := leaderOf(nodes)
		return l != nil && voters(l.n)[fourth.n.ID()]
	})
	if _, ok := fourth.n.Namespace("app"); !ok {
		testutil.Eventually(t, waitTimeout, "the fourth node to replicate", func() bool { _, ok := fourth.n.Namespace("app"); return ok })
	}

	// A graceful leave removes it.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := fourth.m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if l := theLeader(t, nodes); voters(l.n)[fourth.n.ID()] {
		t.Fatal("the node that left is still a voter")
	}
	fourth.kill()
}

func TestDeadServerCleanupKeepsQuorum(t *testing.T) {
	nodes := formCluster(t)
	fourth := newNode(t)
	fourth.start(3, []string{nodes[0].gossip})
	all := append(nodes, fourth)
	testutil.Eventually(t, waitTimeout, "four voters", func() bool { l := leaderOf(all); return l != nil && len(voters(l.n)) == 4 })

	// Kill a follower: it is reported unhealthy and, 4 voters being above
	// the minimum quorum of 3, removed.
	var victim *mnode
	for _, mn := range all {
		if !mn.n.IsLeader() {
			victim = mn
			break
		}
	}
	id := victim.n.ID()
	victim.kill()
	testutil.Eventually(t, waitTimeout, "the killed server to be removed", func() bool {
		l := leaderOf(all)
		return l != nil && len(voters(l.n)) == 3 && !voters(l.n)[id]
	})
	// Kill another: at 3 voters it stays (reported unhealthy) so quorum
	// (2 of 3) stays reachable.
	var second *mnode
	for _, mn := range all {
		if mn.n != nil && !mn.n.IsLeader() {
			second = mn
			break
		}
	}
	id2 := second.n.ID()
	second.kill()
	testutil.Eventually(t, waitTimeout, "the second killed server to be reported unhealthy", func() bool {
		l := leaderOf(all)
		if l == nil {
			return false
		}
		healthy, ok := l.m.Healthy(id2)
		return ok && !healthy
	})
	l := theLeader(t, all)
	if !voters(l.n)[id2] || len(voters(l.n)) != 3 {
		t.Fatalf("below the minimum quorum a dead server was removed: voters %v", voters(l.n))
	}
	// The two survivors still commit.
	if _, err := l.n.CreateNamespace(context.Background(), &fsmv1.CreateNamespace{Name: "still-writable"}); err != nil {
		t.Fatal(err)
	}
}

func TestWrongGossipKeyCannotJoin(t *testing.T) {
	nodes := formCluster(t)
	outsider := newNode(t)
	outsider.mod = func(c *Config) { c.Key = []byte("ffffffffffffffffffffffffffffffff") }
	outsider.start(0, nil)
	n, err := outsider.m.ml.Join([]string{nodes[0].gossip})
	if err == nil || n != 0 {
		t.Fatalf("join with the wrong key: contacted %d, err %v", n, err)
	}
	for _, mn := range nodes {
		for _, mem := range mn.m.Members() {
			if mem.ID == outsider.n.ID() {
				t.Fatalf("node %s lists the outsider", mn.n.ID())
			}
		}
	}
}

func TestRestartOnNewAddressRejoinsUnderItsID(t *testing.T) {
	nodes := formCluster(t)
	var f *mnode
	for _, mn := range nodes {
		if !mn.n.IsLeader() {
			f = mn
			break
		}
	}
	id, oldRaft := f.n.ID(), f.n.RaftAddr()
	f.kill()
	f.start(3, []string{theLeader(t, nodes).gossip}) // same data, new ports
	if f.n.ID() != id || f.n.RaftAddr() == oldRaft {
		t.Fatalf("restart: id %s (was %s), raft %s (was %s)", f.n.ID(), id, f.n.RaftAddr(), oldRaft)
	}
	testutil.Eventually(t, waitTimeout, "the configuration to carry the new address", func() bool {
		l := leaderOf(nodes)
		if l == nil {
			return false
		}
		servers, _ := l.n.Servers()
		for _, s := range servers {
			if string(s.ID) == id {
				return string(s.Address) == f.n.RaftAddr() && s.Suffrage == raft.Voter
			}
		}
		return false
	})
	l := theLeader(t, nodes)
	if _, err := l.n.CreateNamespace(context.Background(), &fsmv1.CreateNamespace{Name: "after-move"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the moved node to replicate", func() bool { _, ok := f.n.Namespace("after-move"); return ok })
}

// logLines is a slog handler that keeps every message, for tests that
// wait for one.
type logLines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	l.mu.Lock()
	l.msgs = append(l.msgs, line)
	l.mu.Unlock()
	return nil
}

func (l *logLines) has(substr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.Contains(m, substr) {
			return true
		}
	}
	return false
}

// TestRemovedServerNotReaddedWhileGossipLags: a server removed from Raft
// while gossip still shows it alive (a leave whose broadcast has not
// arrived) is not added back by the leader's reconcile.
func TestRemovedServerNotReaddedWhileGossipLags(t *testing.T) {
	logs := make([]*logLines, 3)
	nodes := []*mnode{newNode(t), newNode(t), newNode(t)}
	for i, mn := range nodes {
		logs[i] = &logLines{}
		mn.mod = func(c *Config) { c.Logger = slog.New(logs[i]) }
	}
	nodes[0].start(3, nil)
	for _, mn := range nodes[1:] {
		mn.start(3, []string{nodes[0].gossip})
	}
	var l *mnode
	testutil.Eventually(t, waitTimeout, "one leader with three voters", func() bool {
		l = leaderOf(nodes)
		return l != nil && len(voters(l.n)) == 3
	})
	var f *mnode
	for _, mn := range nodes {
		if mn != l {
			f = mn
		}
	}
	// The leader's reconcile registers API addresses: once the follower's
	// is known, the leader has seen it in the configuration.
	testutil.Eventually(t, waitTimeout, "the leader to reconcile the follower", func() bool { _, ok := l.n.NodeAddr(f.n.ID()); return ok })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	// Remove it from Raft only: its gossip stays alive, as when the leave
	// broadcast is lost.
	if err := l.n.RemoveServer(ctx, f.n.ID()); err != nil {
		t.Fatal(err)
	}
	li := slices.Index(nodes, l)
	t.Cleanup(func() {
		if t.Failed() {
			logs[li].mu.Lock()
			t.Logf("leader log:\n%s", strings.Join(logs[li].msgs, "\n"))
			logs[li].mu.Unlock()
		}
	})
	// Under load leadership may move after the removal: any leader
	// declines, so any member's log but the removed one's may say so.
	testutil.Eventually(t, waitTimeout, "the leader to decline re-adding the removed server", func() bool {
		for i, mn := range nodes {
			if mn != f && logs[i].has("not re-adding") && logs[i].has(f.n.ID()) {
				return true
			}
		}
		return false
	})
	servers, err := l.n.Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if string(s.ID) == f.n.ID() {
			t.Fatalf("the removed server is back in the configuration as %v", s.Suffrage)
		}
	}
}

// TestLeaveThroughNewLeaderNotReadded: a server leaves (its gossip still
// alive, as when the leave's broadcast is late) through a leader that took
// over moments before, too new to have seen the server in its
// configuration. The leader heard its own removal, so it does not add the
// server back as a non-voter no one runs. Before, it did whenever the
// removal came before its first reconcile as leader (here: almost always,
// with reconciles 3 s apart).
func TestLeaveThroughNewLeaderNotReadded(t *testing.T) {
	// The premise needs the new leader to keep leading until its next
	// reconcile; on a loaded machine an election may move leadership
	// first (a leader without the history then re-adds the server, a
	// different case). Such an attempt proves nothing: run it again.
	for attempt := 1; attempt <= 3; attempt++ {
		if leaveThroughNewLeader(t) {
			return
		}
		t.Logf("attempt %d: leadership moved before the new leader's reconcile; again", attempt)
	}
	t.Fatal("leadership moved away from the new leader in every attempt")
}

// leaveThroughNewLeader runs TestLeaveThroughNewLeaderNotReadded's case
// once on three fresh nodes; false when leadership left the new leader
// before the case was decided.
func leaveThroughNewLeader(t *testing.T) bool {
	logs := make([]*logLines, 3)
	nodes := []*mnode{newNode(t), newNode(t), newNode(t)}
	defer func() {
		for _, mn := range nodes {
			mn.kill()
		}
	}()
	for i, mn := range nodes {
		logs[i] = &logLines{}
		// Reconciles 3 s apart: the removal below lands before the new
		// leader's first one.
		mn.mod = func(c *Config) { c.Logger, c.ReconcileInterval = slog.New(logs[i]), 3*time.Second }
	}
	nodes[0].start(3, nil)
	for _, mn := range nodes[1:] {
		mn.start(3, []string{nodes[0].gossip})
	}
	var l *mnode
	testutil.Eventually(t, waitTimeout, "one leader with three voters", func() bool {
		l = leaderOf(nodes)
		return l != nil && len(voters(l.n)) == 3
	})
	var next, leaving *mnode
	for _, mn := range nodes {
		switch {
		case mn == l:
		case next == nil:
			next = mn
		default:
			leaving = mn
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := l.n.TransferLeadership(ctx, next.n.ID()); err != nil {
		t.Logf("transfer: %v", err)
		return false
	}
	testutil.Eventually(t, waitTimeout, "the next leader to lead", func() bool { return next.n.IsLeader() })
	// The leave's removal, asked of the leader by the leaving node; its
	// gossip stays alive.
	if err := leaving.n.RemoveServer(ctx, leaving.n.ID()); err != nil {
		t.Fatal(err)
	}
	ni := slices.Index(nodes, next)
	deadline := time.Now().Add(waitTimeout)
	for !(logs[ni].has("not re-adding") && logs[ni].has(leaving.n.ID())) {
		if !next.n.IsLeader() {
			return false
		}
		if time.Now().After(deadline) {
			logs[ni].mu.Lock()
			t.Logf("new leader's log:\n%s", strings.Join(logs[ni].msgs, "\n"))
			logs[ni].mu.Unlock()
			t.Fatalf("timed out after %v waiting for the new leader to decline re-adding the server that left", waitTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	servers, err := next.n.Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if string(s.ID) == leaving.n.ID() {
			t.Fatalf("the server that left is back in the configuration as %v", s.Suffrage)
		}
	}
	return true
}

// stallGate is a slog handler that keeps every message (as logLines) and,
// when autopilot logs that it is removing the server named by victim,
// holds that removal (the log call sits just before it) until the test
// releases it, at most waitTimeout.
type stallGate struct {
	logLines
	victim  string
	seen    chan struct{} // closed when the removal is logged
	release chan struct{} // closed by the test
	once    sync.Once
}

func (g *stallGate) WithAttrs([]slog.Attr) slog.Handler { return g }
func (g *stallGate) WithGroup(string) slog.Handler      { return g }
func (g *stallGate) Handle(ctx context.Context, r slog.Record) error {
	g.logLines.Handle(ctx, r)
	if r.Message != "removing failed server" {
		return nil
	}
	victim := false
	r.Attrs(func(a slog.Attr) bool { victim = victim || a.Value.String() == g.victim; return true })
	if victim {
		g.once.Do(func() {
			close(g.seen)
			select {
			case <-g.release:
			case <-time.After(waitTimeout):
			}
		})
	}
	return nil
}

// TestStalledServerRejoinsAtOnce: a server that stalls (its gossip falls
// silent) long enough for autopilot to remove it as failed, and is back
// before the leader's next reconcile sees it gone, is added back at once
// and promoted again, not held out for rejoinDelay as a server that left.
// The stall is the gossip of one node stopping without a leave, and
// starting again on the same address (as a SIGSTOP/SIGCONT looks to the
// others); the gate makes "back before the next reconcile" certain by
// holding the removal until the leader's gossip shows the server alive.
func TestStalledServerRejoinsAtOnce(t *testing.T) {
	nodes := []*mnode{newNode(t), newNode(t), newNode(t), newNode(t)}
	gates := make([]*stallGate, len(nodes))
	for i, mn := range nodes {
		gates[i] = &stallGate{seen: make(chan struct{}), release: make(chan struct{})}
		mn.mod = func(c *Config) { c.Logger = slog.New(gates[i]) }
	}
	nodes[0].start(3, nil)
	for _, mn := range nodes[1:3] {
		mn.start(3, []string{nodes[0].gossip})
	}
	testutil.Eventually(t, waitTimeout, "one leader with three voters", func() bool { l := leaderOf(nodes); return l != nil && len(voters(l.n)) == 3 })
	nodes[3].start(3, []string{nodes[0].gossip})
	var l *mnode
	testutil.Eventually(t, waitTimeout, "four voters", func() bool { l = leaderOf(nodes); return l != nil && len(voters(l.n)) == 4 })
	var victim *mnode
	for _, mn := range nodes {
		if mn != l {
			victim = mn
			break
		}
	}
	id := victim.n.ID()
	gate := gates[slices.Index(nodes, l)]
	gate.victim = id // set before anything can remove the victim: read by the gate only after
	t.Cleanup(func() {
		if t.Failed() {
			gate.mu.Lock()
			t.Logf("leader log:\n%s", strings.Join(gate.msgs, "\n"))
			gate.mu.Unlock()
		}
	})

	// The stall: the victim's gossip stops answering (no leave is sent).
	if err := victim.m.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gate.seen:
	case <-time.After(waitTimeout):
		t.Fatal("autopilot did not remove the stalled server")
	}
	// Back: gossip again on the same address; the removal is held until
	// the leader's gossip shows the server alive.
	m, err := Start(victim.n, victim.cfg)
	if err != nil {
		t.Fatal(err)
	}
	victim.m = m
	testutil.Eventually(t, waitTimeout, "the leader's gossip to show the server alive again", func() bool {
		for _, mem := range l.m.Members() {
			if mem.ID == id {
				return mem.state == memberlist.StateAlive
			}
		}
		return false
	})
	close(gate.release)
	// At once means well inside rejoinDelay: removed, added back (only a
	// removed server is) and promoted again.
	testutil.Eventually(t, rejoinDelay/2, "the stalled server to be added back and a voter again", func() bool {
		return gate.hasLine("adding server as non-voter", id) && voters(l.n)[id]
	})
	if gate.hasLine("not re-adding", id) {
		t.Fatal("the leader held out a server autopilot removed as failed")
	}
}

// hasLine reports whether one message holds every substring.
func (l *logLines) hasLine(subs ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		all := true
		for _, sub := range subs {
			all = all && strings.Contains(m, sub)
		}
		if all {
			return true
		}
	}
	return false
}
