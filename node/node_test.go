package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	dto "github.com/prometheus/client_model/go"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

func TestForwardedWrite(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	f := c.Followers()
	// A namespace created through a follower, then writes through both.
	createNamespace(t, f[0].Node, "app")
	r1, err := (f[0].Append(ctxT(t), &fsmv1.Append{Namespace: "app", Stream: "acct-1", Messages: []*fsmv1.NewMessage{
		{Type: "Opened", Data: []byte(`{}`)}, {Type: "Deposited", Data: []byte(`{"n":1}`)},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	if r1.GetAppend().FirstPosition != 0 || r1.GetAppend().LastPosition != 1 || r1.GetAppend().FirstGlobalPosition != 1 || r1.GetAppend().LastGlobalPosition != 2 || r1.Index == 0 {
		t.Fatalf("forwarded append result %+v", r1)
	}
	r2, err := appendOne(ctxT(t), f[1].Node, "app", "acct-1", "")
	if err != nil {
		t.Fatal(err)
	}
	if r2.GetAppend().FirstPosition != 2 || r2.GetAppend().FirstGlobalPosition != 3 || r2.Index <= r1.Index {
		t.Fatalf("second forwarded append %+v after %+v", r2, r1)
	}
	// Business errors travel back through the forward unchanged.
	exp := int64(0)
	_, err = f[1].Append(ctxT(t), &fsmv1.Append{Namespace: "app", Stream: "acct-1", ExpectedVersion: &exp, Messages: []*fsmv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}})
	var vc *fsm.VersionConflictError
	if !errors.As(err, &vc) || vc.Actual != 2 || vc.Expected != 0 {
		t.Fatalf("forwarded conflict: %v", err)
	}
	if _, err := appendOne(ctxT(t), f[0].Node, "nope", "s-1", ""); !errors.Is(err, fsm.ErrNamespaceNotFound) {
		t.Fatalf("forwarded append to unknown namespace: %v", err)
	}
	// Exactly once, everywhere, with leader-stamped ids and times.
	var want []fsm.Message
	for i, tn := range c.Nodes {
		msgs := readAll(t, tn.Node, "app", nodeapi.ReadOptions{})
		if len(msgs) != 3 {
			t.Fatalf("node %d holds %d messages, want 3", i, len(msgs))
		}
		for _, m := range msgs {
			if _, err := uuid.Parse(m.ID); err != nil || m.Time == 0 {
				t.Fatalf("message not stamped: %+v", m)
			}
		}
		if want == nil {
			want = msgs
		} else if !reflect.DeepEqual(msgs, want) {
			t.Fatalf("node %d content differs", i)
		}
	}
}

func TestLeaderFailoverNoLostWrites(t *testing.T) {
	c := newCluster(t, 3, nil)
	createNamespace(t, c.Leader().Node, "app")

	type ack struct {
		id     string
		stream string
		res    *fsmv1.Result
	}
	var (
		mu      sync.Mutex
		acked   []ack
		unknown = map[string]bool{}
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	nodes := func() []*Node {
		mu.Lock()
		defer mu.Unlock()
		var out []*Node
		for _, tn := range c.Nodes {
			if tn.Node != nil {
				out = append(out, tn.Node)
			}
		}
		return out
	}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				ns := nodes()
				n := ns[rng.Intn(len(ns))]
				id, stream := uuid.NewString(), fmt.Sprintf("acct-%d", rng.Intn(4))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := appendOne(ctx, n, "app", stream, id)
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, ack{id, stream, res})
				case isUnknownOrUnavailable(err) || errors.Is(err, fsm.ErrClosed):
					unknown[id] = true
				default:
					mu.Unlock()
					t.Errorf("writer %d: unexpected error %v", w, err)
					return
				}
				mu.Unlock()
			}
		}(w)
	}
	countAcked := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	testutil.Eventually(t, waitTimeout, "200 acknowledged writes", func() bool { return countAcked() >= 200 })
	old := c.Leader()
	mu.Lock()
	old.Kill() // killed mid-load: no leadership transfer
	mu.Unlock()
	before := countAcked()
	testutil.Eventually(t, waitTimeout, "200 more acknowledged writes after the failover", func() bool { return countAcked() >= before+200 })
	close(stop)
	wg.Wait()

	c.WaitConverged()
	var reference []fsm.Message
	for _, tn := range c.Nodes {
		if tn.Node == nil {
			continue
		}
		msgs := readAll(t, tn.Node, "app", nodeapi.ReadOptions{})
		if reference == nil {
			reference = msgs
		} else if !reflect.DeepEqual(msgs, reference) {
			t.Fatalf("survivors hold different histories")
		}
	}
	count := map[string]int{}
	next := map[string]int64{}
	for i, m := range reference {
		count[m.ID]++
		if m.GlobalPosition != int64(i+1) {
			t.Fatalf("global positions not gap-free: %d at %d", m.GlobalPosition, i)
		}
		if m.Position != next[m.Stream] {
			t.Fatalf("stream %s: position %d, want %d", m.Stream, m.Position, next[m.Stream])
		}
		next[m.Stream]++
	}
	for _, a := range acked {
		if count[a.id] != 1 {
			t.Fatalf("acknowledged write %s present %d times", a.id, count[a.id])
		}
		m := reference[a.res.GetAppend().FirstGlobalPosition-1]
		if m.ID != a.id || m.Position != a.res.GetAppend().FirstPosition || m.Stream != a.stream {
			t.Fatalf("acknowledged write %s: stored %+v, acknowledged %+v", a.id, m, a.res)
		}
	}
	for id, n := range count {
		if n != 1 {
			t.Fatalf("message %s stored %d times", id, n)
		}
	}
	t.Logf("%d acknowledged, %d unknown outcomes, %d stored", len(acked), len(unknown), len(reference))
}

// smallSnapshots makes Raft snapshot and compact often.
func smallSnapshots(c *Config) {
	c.SnapshotThreshold = 32
	c.SnapshotInterval = 50 * time.Millisecond
	c.TrailingLogs = 16
}

// writeN appends count messages to ns through n, over streams s-0..s-4.
// Each message has a client id, so a write whose outcome is unknown
// (leadership moved while it committed: FastTiming under -race on a
// loaded machine) or that found no leader is sent again, as a client
// would, and written once (idempotent writes).
func writeN(t *testing.T, n *Node, ns string, count int) {
	t.Helper()
	for i := 0; i < count; i++ {
		appendRetrying(t, n, ns, fmt.Sprintf("s-%d", i%5), fmt.Sprintf("append %d", i))
	}
}

// appendRetrying appends one message with a client id to stream through
// n, sending it again while its outcome is unknown or there is no leader
// (see writeN); any other error fails the test, named by what.
func appendRetrying(t *testing.T, n *Node, ns, stream, what string) {
	t.Helper()
	msg := &fsmv1.NewMessage{Id: uuid.NewString(), Type: "T", Data: []byte(`{"k":1}`), ClientId: true}
	testutil.Until(t, waitTimeout, what, func() (bool, string) {
		_, err := n.Append(ctxT(t), &fsmv1.Append{Namespace: ns, Stream: stream, Messages: []*fsmv1.NewMessage{msg}})
		if err != nil && !errors.Is(err, nodeapi.ErrUnknownOutcome) && !errors.Is(err, nodeapi.ErrNoLeader) {
			t.Fatalf("%s: %v", what, err)
		}
		return err == nil, fmt.Sprint(err)
	})
}

func checkHistory(t *testing.T, msgs []fsm.Message, want int) {
	t.Helper()
	if len(msgs) != want {
		t.Fatalf("%d messages, want %d", len(msgs), want)
	}
	ids := map[string]bool{}
	next := map[string]int64{}
	for i, m := range msgs {
		if ids[m.ID] || m.GlobalPosition != int64(i+1) || m.Position != next[m.Stream] {
			t.Fatalf("message %d (%+v) is duplicated or out of place", i, m)
		}
		ids[m.ID] = true
		next[m.Stream]++
	}
}

// eachLogStore runs test once per Raft log store.
func eachLogStore(t *testing.T, test func(t *testing.T, mod func(*Config))) {
	for _, kind := range []string{LogStoreBolt, LogStoreWAL} {
		t.Run(kind, func(t *testing.T) {
			test(t, func(cfg *Config) {
				smallSnapshots(cfg)
				cfg.LogStore = kind
			})
		})
	}
}

func TestRestartSkipsApplied(t *testing.T) { eachLogStore(t, testRestartSkipsApplied) }

func testRestartSkipsApplied(t *testing.T, mod func(*Config)) {
	c := newCluster(t, 3, mod)
	var cfg Config
	mod(&cfg)
	for _, tn := range c.Nodes {
		if kind, err := existingLogStore(filepath.Join(tn.Dir, "raft")); err != nil || kind != cfg.LogStore {
			t.Fatalf("node %s keeps its log in %q (%v), want %q", tn.Dir, kind, err, cfg.LogStore)
		}
	}
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	writeN(t, l.Node, "app", 300)
	c.WaitConverged()
	for _, tn := range []*TestNode{c.Followers()[0], c.Leader()} {
		testutil.Eventually(t, waitTimeout, "a snapshot (durable floor) on the node", func() bool {
			floor, _ := tn.store.Floor()
			return floor.Index > 100
		})
		before := tn.AppliedIndex()
		tn.Stop()
		tn.Restart()
		if got := tn.AppliedIndex(); got == 0 || got > before {
			t.Fatalf("restarted at applied index %d (was %d)", got, before)
		}
		writeN(t, c.Leader().Node, "app", 20)
		c.WaitConverged()
		if tn.AppliedIndex() <= before {
			t.Fatalf("applied index did not continue: %d after restart, %d before", tn.AppliedIndex(), before)
		}
	}
	for _, tn := range c.Nodes {
		checkHistory(t, readAll(t, tn.Node, "app", nodeapi.ReadOptions{}), 340)
	}
}

func TestSnapshotInstallOnWipedFollower(t *testing.T) {
	eachLogStore(t, testSnapshotInstallOnWipedFollower)
}

func testSnapshotInstallOnWipedFollower(t *testing.T, mod func(*Config)) {
	c := newCluster(t, 3, mod)
	createNamespace(t, c.Leader().Node, "app")
	writeN(t, c.Leader().Node, "app", 200)
	c.WaitConverged()
	f := c.Followers()[0]
	f.Stop()
	// Wipe everything but the node id: the same member with an empty disk.
	for _, d := range []string{"raft", "fsm"} {
		if err := os.RemoveAll(filepath.Join(f.Dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	writeN(t, c.Leader().Node, "app", 100)
	l := c.Leader()
	testutil.Eventually(t, waitTimeout, "the leader to compact its log", func() bool {
		first, _ := l.logs.FirstIndex()
		return first > 10
	})
	f.Restart()
	c.WaitConverged()
	testutil.Eventually(t, waitTimeout, "the wiped follower to record an installed snapshot", func() bool {
		snap := f.raft.Stats()["last_snapshot_index"]
		return snap != "0" && snap != ""
	})
	writeN(t, l.Node, "app", 10) // and log replay continues after it
	c.WaitConverged()
	want := readAll(t, l.Node, "app", nodeapi.ReadOptions{})
	checkHistory(t, want, 310)
	if got := readAll(t, f.Node, "app", nodeapi.ReadOptions{Consistency: nodeapi.Local}); !reflect.DeepEqual(got, want) {
		t.Fatalf("wiped follower holds %d messages, leader %d, or they differ", len(got), len(want))
	}
}

func TestRefuseStartWhenStateOlderThanLog(t *testing.T) {
	c := newCluster(t, 3, smallSnapshots)
	createNamespace(t, c.Leader().Node, "app")
	writeN(t, c.Leader().Node, "app", 200)
	c.WaitConverged()
	f := c.Followers()[0]
	testutil.Eventually(t, waitTimeout, "the follower to compact its log", func() bool {
		first, _ := f.logs.FirstIndex()
		return first > 10
	})
	f.Stop()
	if err := os.RemoveAll(filepath.Join(f.Dir, "fsm")); err != nil {
		t.Fatal(err)
	}
	_, err := Open(f.config(false))
	if err == nil || !strings.Contains(err.Error(), "older than the log") || !strings.Contains(err.Error(), "delete the whole data directory") {
		t.Fatalf("open with lost state machine data: %v", err)
	}
}

// Writes a follower forwards at the same time share calls to the leader,
// and each still gets its own result: every position exactly once.
func TestConcurrentForwardedWrites(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	createNamespace(t, c.Leader().Node, "app")
	f := c.Followers()[0]
	const writes = 120
	positions := make(chan int64, writes)
	var wg sync.WaitGroup
	for i := 0; i < writes; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := appendOne(ctxT(t), f.Node, "app", "acct-1", "")
			if err != nil {
				t.Error(err)
				return
			}
			positions <- r.GetAppend().FirstPosition
		}()
	}
	wg.Wait()
	close(positions)
	seen := make(map[int64]bool)
	for p := range positions {
		if seen[p] || p < 0 || p >= writes {
			t.Fatalf("position %d given twice or out of range", p)
		}
		seen[p] = true
	}
	if len(seen) != writes {
		t.Fatalf("%d writes acknowledged, want %d", len(seen), writes)
	}
	var m dto.Metric
	if err := f.m.forwardBatch.Write(&m); err != nil {
		t.Fatal(err)
	}
	calls, forwarded := m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	if forwarded < writes || calls >= uint64(forwarded) {
		t.Fatalf("%d calls carried %v writes: want %d writes in fewer calls", calls, forwarded, writes)
	}
	for i, tn := range c.Nodes {
		if msgs := readAll(t, tn.Node, "app", nodeapi.ReadOptions{}); len(msgs) != writes {
			t.Fatalf("node %d holds %d messages, want %d", i, len(msgs), writes)
		}
	}
}

func TestFollowerLinearizableRead(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	f := c.Followers()
	for i := 0; i < 150; i++ {
		res, err := appendOne(ctxT(t), l.Node, "app", "acct-1", "")
		if err != nil {
			t.Fatal(err)
		}
		var version int64
		n := f[i%2].Node
		applied, err := n.Read(ctxT(t), "app", nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}, func(v *fsm.View) (err error) {
			version, err = v.StreamVersion("acct-1")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if version != res.GetAppend().LastPosition || applied < res.Index {
			t.Fatalf("iteration %d: follower read version %d at applied %d after write %+v", i, version, applied, res)
		}
	}
}

func TestSessionRead(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	c.WaitConverged()
	f := c.Followers()[0]
	// An index past the cluster's commit index is refused at once, on the
	// leader and on a follower, instead of waited for.
	for _, n := range []*TestNode{l, f} {
		err := n.ReadBarrier(ctxT(t), nodeapi.ReadOptions{Consistency: nodeapi.Session, MinIndex: math.MaxUint64})
		var v *fsm.ValidationError
		if !errors.As(err, &v) || v.Field != "read.min_index" {
			t.Fatalf("session read at min index 2^64-1: %v, want a validation error of read.min_index", err)
		}
	}
	f.Proxy.SetBlocked(true) // the follower lags: it hears nothing
	res, err := appendOne(ctxT(t), l.Node, "app", "acct-1", "")
	if err != nil {
		t.Fatal(err)
	}
	version := func(ctx context.Context, opts nodeapi.ReadOptions) (int64, error) {
		var v int64
		_, err := f.Read(ctx, "app", opts, func(view *fsm.View) (err error) {
			v, err = view.StreamVersion("acct-1")
			return err
		})
		return v, err
	}
	// While lagging, a session read with the write's index waits and gives up.
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := version(short, nodeapi.ReadOptions{Consistency: nodeapi.Session, MinIndex: res.Index}); !errors.Is(err, nodeapi.ErrNotCaughtUp) {
		t.Fatalf("session read on a lagging follower: %v", err)
	}
	if v, err := version(ctxT(t), nodeapi.ReadOptions{Consistency: nodeapi.Local}); err != nil || v != -1 {
		t.Fatalf("local read on the lagging follower saw version %d (%v): it should not have the write yet", v, err)
	}
	// The session read started while lagging returns once the follower catches up.
	got := make(chan error, 1)
	go func() {
		v, err := version(ctxT(t), nodeapi.ReadOptions{Consistency: nodeapi.Session, MinIndex: res.Index})
		if err == nil && v != 0 {
			err = fmt.Errorf("version %d, want 0", v)
		}
		got <- err
	}()
	f.Proxy.SetBlocked(false)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("session read did not return after the follower caught up")
	}
}

func TestLocalReadStaleness(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	c.WaitConverged()
	f := c.Followers()[0]
	f.Proxy.SetBlocked(true)
	if _, err := appendOne(ctxT(t), l.Node, "app", "acct-1", ""); err != nil {
		t.Fatal(err)
	}
	read := func(n *Node, opts nodeapi.ReadOptions) (int64, error) {
		var v int64
		_, err := n.Read(ctxT(t), "app", opts, func(view *fsm.View) (err error) {
			v, err = view.StreamVersion("acct-1")
			return err
		})
		return v, err
	}
	bound := 300 * time.Millisecond
	testutil.Eventually(t, waitTimeout, "the isolated follower's bounded local read to fail as stale", func() bool {
		_, err := read(f.Node, nodeapi.ReadOptions{Consistency: nodeapi.Local, MaxStaleness: bound})
		return errors.Is(err, nodeapi.ErrStale)
	})
	if since := time.Since(f.raft.LastContact()); since < bound {
		t.Fatalf("stale after only %s without the leader (bound %s)", since, bound)
	}
	if v, err := read(f.Node, nodeapi.ReadOptions{Consistency: nodeapi.Local}); err != nil || v != -1 {
		t.Fatalf("unbounded local read: version %d, %v; want the stale answer -1", v, err)
	}
	if v, err := read(l.Node, nodeapi.ReadOptions{Consistency: nodeapi.Local, MaxStaleness: time.Nanosecond}); err != nil || v != 0 {
		t.Fatalf("leader's bounded local read: version %d, %v", v, err)
	}
}

func TestNoLeaderFailsUnavailable(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.LeaderWait = 500 * time.Millisecond })
	createNamespace(t, c.Leader().Node, "app")
	c.WaitConverged()
	f := c.Followers()
	survivor := f[0]
	for _, tn := range c.Nodes {
		if tn != survivor {
			tn.Kill()
		}
	}
	testutil.Eventually(t, waitTimeout, "the survivor to lose its leader", func() bool { id, _ := survivor.Leader(); return id == "" })
	if _, err := appendOne(ctxT(t), survivor.Node, "app", "s-1", ""); !errors.Is(err, nodeapi.ErrNoLeader) {
		t.Fatalf("append without a quorum: %v", err)
	}
	if _, err := survivor.Read(ctxT(t), "app", nodeapi.ReadOptions{}, func(*fsm.View) error { return nil }); !errors.Is(err, nodeapi.ErrNoLeader) {
		t.Fatalf("linearizable read without a quorum: %v", err)
	}
	if survivor.raft.State() == raft.Leader {
		t.Fatal("a single survivor of three became leader")
	}
}
