package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// TestDiskFullAlarm fills a follower's disk (each node's data directory
// is its own small tmpfs): the leader refuses writes through every node
// with nodeapi.ErrStorageFull, never an unknown outcome, while reads and a
// namespace deletion still work; once space is freed, writes go again.
func TestDiskFullAlarm(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs per node")
	}
	const size, minFree = 256 << 20, 64 << 20
	mount := mountTmpfs(t, "256m")
	c := newCluster(t, 3, func(cfg *Config) {
		mount(cfg)
		cfg.MinFreeDisk, cfg.DiskCheckInterval = minFree, 20*time.Millisecond
		cfg.MemTableSize = 4 << 20
	})
	stopFirst(t, c)
	// The harness registered every API address (membership's job in
	// production): a refusal names the server.
	createNamespace(t, c.Leader().Node, "app")
	createNamespace(t, c.Leader().Node, "scratch")
	writeN(t, c.Leader().Node, "app", 20)

	full := c.Followers()[0]
	free, err := freeDiskBytes(full.Dir)
	if err != nil || free > size {
		t.Fatalf("free space of the tmpfs: %d %v", free, err)
	}
	filler := filepath.Join(full.Dir, "filler")
	if err := os.WriteFile(filler, make([]byte, free-minFree/2), 0o600); err != nil {
		t.Fatal(err)
	}
	var refused error
	testutil.Eventually(t, waitTimeout, "the leader to refuse writes", func() bool {
		_, refused = appendOne(ctxT(t), c.Leader().Node, "app", "s-1", "")
		return refused != nil
	})
	if !errors.Is(refused, nodeapi.ErrStorageFull) || !strings.Contains(refused.Error(), "server "+full.ID()+" has") {
		t.Fatalf("write on a full cluster: %v, want ErrStorageFull naming %s", refused, full.ID())
	}
	t.Logf("refused: %v", refused)
	for _, tn := range c.Nodes {
		_, err := appendOne(ctxT(t), tn.Node, "app", "s-1", "")
		if !errors.Is(err, nodeapi.ErrStorageFull) || errors.Is(err, nodeapi.ErrUnknownOutcome) {
			t.Fatalf("write through %s while full: %v, want ErrStorageFull", tn.ID(), err)
		}
		if got := len(readAll(t, tn.Node, "app", nodeapi.ReadOptions{Consistency: nodeapi.Linearizable})); got < 20 {
			t.Fatalf("read through %s while full: %d messages", tn.ID(), got)
		}
	}
	if _, err := c.Followers()[1].CreateNamespace(ctxT(t), &fsmv1.CreateNamespace{Name: "more"}); !errors.Is(err, nodeapi.ErrStorageFull) {
		t.Fatalf("namespace create while full: %v, want ErrStorageFull", err)
	}
	if _, err := c.Followers()[1].DeleteNamespace(ctxT(t), &fsmv1.DeleteNamespace{Name: "scratch"}); err != nil {
		t.Fatalf("deleting a namespace (frees space) while full: %v", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "writes to resume", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := appendOne(ctx, full.Node, "app", "s-1", "")
		return err == nil
	})
}

// TestDiskAlarmHoldsWhileAFullVoterIsSilent: a full voter that does not
// answer a check (slow, cut off, down) still counts with its last answer for
// diskReportTTL, so the alarm does not clear for one missed answer and
// let writes reach a disk that cannot take them. TestDiskFullAlarm failed
// under load this way: the check waits DiskCheckInterval (20 ms there)
// for each answer, and a late one cleared the alarm. Past the TTL a voter
// still silent is taken as down and stops holding writes back.
func TestDiskAlarmHoldsWhileAFullVoterIsSilent(t *testing.T) {
	const minFree = 64 << 20
	const interval = 20 * time.Millisecond
	mount := mountTmpfs(t, "256m")
	c := newCluster(t, 3, func(cfg *Config) {
		mount(cfg)
		cfg.MinFreeDisk, cfg.DiskCheckInterval = minFree, interval
		cfg.MemTableSize = 4 << 20
	})
	stopFirst(t, c)
	createNamespace(t, c.Leader().Node, "app")
	full := c.Followers()[0]
	free, err := freeDiskBytes(full.Dir)
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(full.Dir, "filler")
	if err := os.WriteFile(filler, make([]byte, free-minFree/2), 0o600); err != nil {
		t.Fatal(err)
	}
	// The full voter must be a follower, for the leader to ask it (under
	// load leadership may have moved to it), and that leader must have
	// had its answer: it refuses writes.
	var l *TestNode
	testutil.Until(t, waitTimeout, "a leader other than the full voter to refuse writes", func() (bool, string) {
		if l = c.Leader(); l == full {
			_ = full.TransferLeadership(ctxT(t), c.Followers()[0].ID())
			return false, "the full voter leads"
		}
		_, err := appendOne(ctxT(t), l.Node, "app", "s-1", "")
		return errors.Is(err, nodeapi.ErrStorageFull) && c.Leader() == l, fmt.Sprint(err)
	})
	// Stopped, it answers no check (a partition of it alone is one-way
	// in this harness: it could still win an election from the others
	// under load, and lead).
	full.Stop()
	silent := time.Now()
	// Well inside the TTL: 25 checks found it silent, and it still counts.
	for time.Since(silent) < 25*interval {
		if _, err := appendOne(ctxT(t), l.Node, "app", "s-1", ""); !errors.Is(err, nodeapi.ErrStorageFull) {
			t.Fatalf("write %s after the full voter went silent: %v, want ErrStorageFull (its last answer holds for %s)",
				time.Since(silent).Round(time.Millisecond), err, diskReportTTL)
		}
	}
	testutil.Until(t, waitTimeout, "writes to go once the silent voter's answer is older than the TTL", func() (bool, string) {
		_, err := appendOne(ctxT(t), l.Node, "app", "s-1", "")
		return err == nil, fmt.Sprint(err)
	})
	// Its last answer came a check or so before it went silent (checks
	// every 20 ms, each waiting a second at most): the TTL runs from it.
	if waited := time.Since(silent); waited < diskReportTTL-2*time.Second {
		t.Fatalf("writes went %s after the full voter went silent, long before its answer's TTL of %s", waited, diskReportTTL)
	}
	// Free the space before it hears the writes it missed.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	full.Restart()
	c.WaitConverged()
}

// mountTmpfs gives each node's data directory a tmpfs of its own, once.
// A tmpfs must not go while its node still applies: call stopFirst on the
// cluster once it started.
func mountTmpfs(t *testing.T, size string) func(cfg *Config) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs per node")
	}
	var mu sync.Mutex
	mounted := map[string]bool{}
	return func(cfg *Config) {
		mu.Lock()
		defer mu.Unlock()
		if !mounted[cfg.DataDir] {
			if err := syscall.Mount("tmpfs", cfg.DataDir, "tmpfs", 0, "size="+size); err != nil {
				t.Skipf("cannot mount a tmpfs: %v", err)
			}
			dir := cfg.DataDir
			t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
			mounted[dir] = true
		}
	}
}

// stopFirst stops c's nodes before the test's earlier cleanups run (the
// tmpfs unmounts; cleanups run last registered first).
func stopFirst(t *testing.T, c *TestCluster) {
	t.Cleanup(func() {
		for _, tn := range c.Nodes {
			tn.Kill()
		}
	})
}

// TestCreateNamespaceRefusedWhenDiskFull: a namespace create opens a
// database on every voter at once, so the leader asks every voter for its
// free space when it is asked for one, instead of trusting the alarm's
// last check: with a follower's disk under the minimum and the alarm not
// yet raised (its check is an hour away), the create is refused with
// ErrStorageFull naming that follower, through any node, while appends
// still go. Once space is freed the create goes.
func TestCreateNamespaceRefusedWhenDiskFull(t *testing.T) {
	t.Parallel()
	const minFree = 64 << 20
	mount := mountTmpfs(t, "256m")
	c := newCluster(t, 3, func(cfg *Config) {
		mount(cfg)
		cfg.MinFreeDisk, cfg.DiskCheckInterval = minFree, time.Hour
		cfg.MemTableSize = 4 << 20
	})
	stopFirst(t, c)
	createNamespace(t, c.Leader().Node, "app")
	full := c.Followers()[0]
	free, err := freeDiskBytes(full.Dir)
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(full.Dir, "filler")
	if err := os.WriteFile(filler, make([]byte, free-minFree/2), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tn := range c.Nodes {
		_, err := tn.CreateNamespace(ctxT(t), &fsmv1.CreateNamespace{Name: "tenant"})
		if !errors.Is(err, nodeapi.ErrStorageFull) || !strings.Contains(err.Error(), "server "+full.ID()+" has") {
			t.Fatalf("create through %s with a full follower: %v, want ErrStorageFull naming %s", tn.ID(), err, full.ID())
		}
	}
	if _, err := appendOne(ctxT(t), c.Leader().Node, "app", "s-1", ""); err != nil {
		t.Fatalf("append (the alarm is not raised): %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, full.Node, "tenant")
}

// TestApplyStorageFailureSaysWhatToDo: a storage error inside apply still
// stops the node (the panic goes on), after logging what happened and
// what the operator should do.
func TestApplyStorageFailureSaysWhatToDo(t *testing.T) {
	t.Parallel()
	_, sm := memStateMachine(t)
	var logged string
	sm.onFailure = func(r any) { logged = storageFailure(r, "/data/skald") }
	sm.before = func() { // as the state machine fails on a full disk
		panic(fmt.Errorf("fsm: storage failure, stopping: stage message: %w", syscall.ENOSPC))
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("a storage failure in apply did not stop the node")
			}
		}()
		sm.ApplyBatch([]*raft.Log{{Index: 1 << 40, Type: raft.LogCommand}})
	}()
	for _, want := range []string{"disk is full", "no space left on device", "free space on the volume of /data/skald and restart"} {
		if !strings.Contains(logged, want) {
			t.Fatalf("storage failure log %q lacks %q", logged, want)
		}
	}
}

// TestNewLeaderChecksDisksAtOnce: a follower's alarm is always clear, so a
// node that becomes leader checks the voters' disks at once instead of
// accepting writes until its first tick (an hour away here): with a
// voter under the minimum, appends through the new leader are refused
// with ErrStorageFull naming that voter within moments of the election.
func TestNewLeaderChecksDisksAtOnce(t *testing.T) {
	const minFree = 64 << 20
	mount := mountTmpfs(t, "256m")
	c := newCluster(t, 3, func(cfg *Config) {
		mount(cfg)
		cfg.MinFreeDisk, cfg.DiskCheckInterval = minFree, time.Hour
		cfg.MemTableSize = 4 << 20
	})
	stopFirst(t, c)
	createNamespace(t, c.Leader().Node, "app")
	followers := c.Followers()
	full, next := followers[0], followers[1]
	free, err := freeDiskBytes(full.Dir)
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(full.Dir, "filler")
	if err := os.WriteFile(filler, make([]byte, free-minFree/2), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := appendOne(ctxT(t), c.Leader().Node, "app", "s-1", ""); err != nil {
		t.Fatalf("append before the election (the old leader's check is an hour away): %v", err)
	}
	testutil.Until(t, 30*time.Second, "leadership moves to "+next.ID(), func() (bool, string) {
		if next.IsLeader() {
			return true, ""
		}
		err := c.Leader().TransferLeadership(ctxT(t), next.ID())
		return next.IsLeader(), fmt.Sprintf("transfer: %v", err)
	})
	testutil.Until(t, 15*time.Second, "the new leader refuses appends", func() (bool, string) {
		_, err := appendOne(ctxT(t), next.Node, "app", "s-1", "")
		if errors.Is(err, nodeapi.ErrStorageFull) && strings.Contains(err.Error(), "server "+full.ID()+" has") {
			return true, ""
		}
		return false, fmt.Sprintf("append through the new leader: %v", err)
	})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
}
