package node

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/prometheus/client_golang/prometheus"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
)

// TestStorageStallOnEveryReplica is finding 2 of issue 28: under a load
// that exhausts every node's file descriptors, creating a namespace made
// every replica fail to open its Pebble database on the same entry, panic
// and stop. Now every replica waits: each reports the stall (StorageStall
// for /readyz, the skald_node_storage_stalled gauge) with what to free,
// the write waits with it, and once descriptors are free again every
// replica applies the entry by itself: the write gets the result a healthy
// cluster computes and the replicas hold the same namespace.
func TestStorageStallOnEveryReplica(t *testing.T) {
	t.Parallel()
	var noFDs atomic.Bool
	inject := errorfs.InjectorFunc(func(op errorfs.Op) error {
		// Opening or creating any namespace database file.
		if noFDs.Load() && strings.Contains(op.Path, "/fsm/ns/") &&
			(op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpLock || op.Kind == errorfs.OpMkdirAll || op.Kind == errorfs.OpOpen) {
			return &os.PathError{Op: "open", Path: op.Path, Err: syscall.EMFILE}
		}
		return nil
	})
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.wrapFS = func(fs vfs.FS) vfs.FS { return errorfs.Wrap(fs, inject) }
	})
	createNamespace(t, c.Leader().Node, "app")
	if _, err := appendOne(ctxT(t), c.Leader().Node, "app", "s-1", ""); err != nil {
		t.Fatal(err)
	}
	// Every replica has opened "app" before descriptors run out: a
	// follower still opening it under load met the injected error in the
	// middle of Pebble's Open, where Pebble calls Fatalf (MANIFEST set
	// current failed) instead of returning it, and the node stopped.
	c.WaitConverged()

	noFDs.Store(true)
	type outcome struct {
		res *fsmv1.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := c.Followers()[0].CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: "tenant"})
		done <- outcome{res, err}
	}()
	for _, tn := range c.Nodes {
		testutil.Until(t, waitTimeout, "every replica to report the stall", func() (bool, string) {
			err := tn.StorageStall()
			return err != nil && strings.Contains(err.Error(), "too many open files") &&
				strings.Contains(err.Error(), "raise its limit"), "node " + tn.ID() + ": " + errString(err)
		})
		if v := gaugeValue(t, tn.Registry, "skald_node_storage_stalled"); v != 1 {
			t.Fatalf("node %s: skald_node_storage_stalled = %v while stalled", tn.ID(), v)
		}
	}
	select {
	case o := <-done:
		t.Fatalf("the create returned while every replica was stalled: %+v %v", o.res, o.err)
	default:
	}
	stalledAt := c.Leader().AppliedIndex()

	noFDs.Store(false) // descriptors are free again
	var o outcome
	select {
	case o = <-done:
	case <-time.After(waitTimeout):
		t.Fatal("the create did not complete once descriptors were free")
	}
	if o.err != nil || o.res.GetCreateNamespace().GetName() != "tenant" || o.res.GetCreateNamespace().GetId() <= stalledAt {
		t.Fatalf("create after the stall: %+v %v (stalled at applied index %d)", o.res, o.err, stalledAt)
	}
	for _, tn := range c.Nodes {
		testutil.Until(t, waitTimeout, "every replica to hold the namespace", func() (bool, string) {
			info, ok := tn.store.Namespace("tenant")
			return ok && info.ID == o.res.GetCreateNamespace().GetId() && tn.StorageStall() == nil, errString(tn.StorageStall())
		})
		if v := gaugeValue(t, tn.Registry, "skald_node_storage_stalls_total"); v != 1 {
			t.Fatalf("node %s: %v stalls counted, want 1", tn.ID(), v)
		}
	}
	if _, err := appendOne(ctxT(t), c.Followers()[1].Node, "tenant", "s-1", ""); err != nil {
		t.Fatalf("write to the namespace created during the stall: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// gaugeValue reads one unlabelled gauge or counter from reg.
func gaugeValue(t testing.TB, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue()
		}
		return m.GetCounter().GetValue()
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// TestShutdownDuringStorageStall: a node whose state machine waits for a
// resource still shuts down promptly (Raft's shutdown waits for the apply
// goroutine); the entries it was applying are not counted as applied, and
// they apply when the node starts again with the resource back.
func TestShutdownDuringStorageStall(t *testing.T) {
	var noFDs atomic.Bool
	inject := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if noFDs.Load() && strings.Contains(op.Path, "/fsm/ns/") && (op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpMkdirAll) {
			return &os.PathError{Op: "open", Path: op.Path, Err: syscall.EMFILE}
		}
		return nil
	})
	c := newCluster(t, 1, func(cfg *Config) {
		cfg.wrapFS = func(fs vfs.FS) vfs.FS { return errorfs.Wrap(fs, inject) }
	})
	tn := c.Leader()
	n := tn.Node
	noFDs.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := n.CreateNamespace(context.Background(), &fsmv1.CreateNamespace{Name: "tenant"})
		done <- err
	}()
	testutil.Eventually(t, waitTimeout, "the stall", func() bool { return n.StorageStall() != nil })
	applied := n.store.AppliedIndex()

	stopped := make(chan struct{})
	go func() {
		tn.Kill()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(waitTimeout):
		t.Fatal("shutdown hangs on a stalled apply")
	}
	select {
	case err := <-done:
		if !isUnknownOrUnavailable(err) {
			t.Fatalf("the stalled write answered %v, want an unknown outcome", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the stalled write got no answer")
	}
	if got := n.store.AppliedIndex(); got != applied {
		t.Fatalf("applied index moved from %d to %d with the entry not applied", applied, got)
	}

	noFDs.Store(false)
	tn.Restart()
	testutil.Eventually(t, waitTimeout, "the entry to apply after the restart", func() bool {
		_, ok := tn.store.Namespace("tenant")
		return ok
	})
}
