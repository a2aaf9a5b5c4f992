package node

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/skalddb/skald/internal/testutil"
)

func TestTransferLeadership(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := c.Leader()
	target := c.Followers()[1]
	if err := old.TransferLeadership(ctxT(t), target.ID()); err != nil {
		t.Fatal(err)
	}
	if l := c.Leader(); l != target {
		t.Fatalf("leader is %s after transfer to %s", l.ID(), target.ID())
	}
	createNamespace(t, old.Node, "app") // forwarded to the new leader
}

func TestGracefulCloseHandsOverLeadership(t *testing.T) {
	c := newCluster(t, 3, nil)
	// From now on an election would wait 30 s for a timeout: within the
	// 10 s below, only a handover can produce a leader.
	for _, tn := range c.Nodes {
		rc := tn.raft.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = 30*time.Second, 30*time.Second
		if err := tn.raft.ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
	}
	old := c.Leader()
	old.Stop()
	var l *TestNode
	testutil.Eventually(t, 10*time.Second, "a new leader by handover", func() bool {
		for _, tn := range c.Nodes {
			if tn.Node != nil && tn.IsLeader() {
				l = tn
				return true
			}
		}
		return false
	})
	if l == old {
		t.Fatal("stopped node still leads")
	}
	createNamespace(t, c.Followers()[0].Node, "app")
}

func TestWatchdogHandsOverFromStalledLeader(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		stalled string // id of the node whose state machine stalls
		release = make(chan struct{})
	)
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.WatchdogTimeout = 300 * time.Millisecond
		dir := cfg.DataDir
		cfg.beforeApply = func() {
			mu.Lock()
			s := stalled
			mu.Unlock()
			if s != "" && s == dir {
				<-release
			}
		}
	})
	defer close(release)
	old := c.Leader()
	createNamespace(t, old.Node, "app")
	mu.Lock()
	stalled = old.Dir
	mu.Unlock()
	go appendOne(context.Background(), old.Node, "app", "s-1", "") // hangs in the stalled state machine
	testutil.Eventually(t, waitTimeout, "leadership to leave the stalled leader", func() bool {
		for _, tn := range c.Nodes {
			if tn != old && tn.IsLeader() {
				return true
			}
		}
		return false
	})
	var l *TestNode
	for _, tn := range c.Nodes {
		if tn != old && tn.IsLeader() {
			l = tn
		}
	}
	if _, err := appendOne(ctxT(t), l.Node, "app", "s-1", ""); err != nil {
		t.Fatalf("write on the new leader: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var once sync.Once
	c := newCluster(t, 3, func(cfg *Config) {
		once.Do(func() { cfg.Registerer = reg }) // the bootstrap node only
	})
	l := c.Nodes[0]
	if !l.IsLeader() {
		t.Skip("bootstrap node lost leadership")
	}
	createNamespace(t, l.Node, "app")
	if _, err := appendOne(ctxT(t), l.Node, "app", "s-1", ""); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, f := range families {
		got[f.GetName()] = f
	}
	if v := got["skald_raft_state"].GetMetric()[0].GetGauge().GetValue(); v != 2 {
		t.Fatalf("skald_raft_state = %v on the leader, want 2", v)
	}
	if v := got["skald_raft_applied_index"].GetMetric()[0].GetGauge().GetValue(); v < 3 {
		t.Fatalf("skald_raft_applied_index = %v", v)
	}
	if n := got["skald_node_apply_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); n < 2 {
		t.Fatalf("skald_node_apply_seconds has %d samples, want >= 2", n)
	}
	if n := got["skald_node_apply_batch_entries"].GetMetric()[0].GetHistogram().GetSampleCount(); n == 0 {
		t.Fatal("no apply batches observed")
	}
	for name := range got {
		if !strings.HasPrefix(name, "skald_") {
			t.Fatalf("metric %s outside the skald namespace", name)
		}
	}
}

// droppedFuture is a Raft future that is never answered, as Raft leaves
// the futures still queued when it shuts down.
type droppedFuture struct{ never chan struct{} }

func (f droppedFuture) Error() error { <-f.never; return nil }

// TestCloseWithDroppedBarrier: a new leader's barrier that Raft never
// answers must not keep Close from returning (CI once hung 10 minutes in
// Close's wait for the leader loop).
func TestCloseWithDroppedBarrier(t *testing.T) {
	t.Parallel()
	var (
		armed   atomic.Bool
		waiting = make(chan struct{}, 1)
		never   = make(chan struct{})
	)
	t.Cleanup(func() { close(never) })
	c := newCluster(t, 1, func(cfg *Config) {
		cfg.leaderBarrier = func(f raft.Future) raft.Future {
			if !armed.Load() {
				return f
			}
			waiting <- struct{}{}
			return droppedFuture{never}
		}
	})
	tn := c.Nodes[0]
	armed.Store(true)
	tn.notify <- true // as Raft does on winning an election
	select {
	case <-waiting:
	case <-time.After(waitTimeout):
		t.Fatal("the leader loop never asked for a barrier")
	}
	n := tn.Node
	tn.Node = nil // closed here; a Close that hangs must not hang cleanup too
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("Close still blocked after %s on a barrier Raft never answers", waitTimeout)
	}
}
