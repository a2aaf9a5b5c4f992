package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node/nodeapi"
)

// The disk-space alarm, like etcd's NOSPACE: a voter whose disk fills up
// can no longer apply entries, and a state machine that cannot write
// stops the node (replicas must not diverge). So the leader refuses new
// writes before proposing them while any voter reports less free space
// than Config.MinFreeDisk; reads keep working, and the alarm clears by
// itself once every voter is above the minimum again.

// freeDiskBytes returns the bytes unprivileged writers may still use on
// the filesystem holding dir.
func freeDiskBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("node: free space of %s: %w", dir, err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// localFreeDisk is this node's free space, ok false when it has no disk
// (Config.InMemory) or cannot tell.
func (n *Node) localFreeDisk() (free uint64, ok bool) {
	if n.cfg.InMemory {
		return 0, false
	}
	free, err := freeDiskBytes(n.cfg.DataDir)
	if err != nil {
		n.log.Warn("cannot read free disk space", "err", err)
		return 0, false
	}
	return free, true
}

// diskReportTTL is how long a voter's last answer about its free space
// stands in for an answer it does not give: a voter slow to answer one
// check (a busy or stalled disk, a long GC, a loaded machine; the
// leader's check waits DiskCheckInterval, 1 s by default) is still as
// full as it said, and writes must not go to it meanwhile; a voter
// silent for longer is taken as down (not applying either) and stops
// holding writes back. Five seconds is five default checks, and several
// election timeouts: a voter gone that long is not coming back at once.
const diskReportTTL = 5 * time.Second

// diskReport is a voter's last answer about its free space.
type diskReport struct {
	free uint64
	at   time.Time
}

// diskAlarm holds the leader's current refusal, nil while writes may go,
// and each voter's last report (by server id).
type diskAlarm struct {
	mu      sync.Mutex
	reason  error
	reports map[string]diskReport
}

// report records id's free space as of now.
func (a *diskAlarm) report(id string, free uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reports == nil {
		a.reports = map[string]diskReport{}
	}
	a.reports[id] = diskReport{free: free, at: time.Now()}
}

// lastReport is id's last report if younger than diskReportTTL.
func (a *diskAlarm) lastReport(id string) (free uint64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.reports[id]
	if !ok || time.Since(r.at) > diskReportTTL {
		return 0, false
	}
	return r.free, true
}

func (a *diskAlarm) set(reason error) (changed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	changed = (a.reason == nil) != (reason == nil)
	a.reason = reason
	return changed
}

func (a *diskAlarm) err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reason
}

// diskWatch re-evaluates the alarm every Config.DiskCheckInterval while
// this node leads (a follower clears its own: only the leader proposes),
// and at once when it becomes leader (diskKick): a new leader starts with
// a clear alarm, and must not accept writes for a whole interval on that.
func (n *Node) diskWatch() {
	interval := n.cfg.DiskCheckInterval
	if n.cfg.MinFreeDisk == 0 {
		interval = -1 // no minimum: nothing to watch
	}
	n.every(interval, n.diskKick, n.checkDiskAlarm)
}

// checkDiskAlarm is one round of diskWatch.
func (n *Node) checkDiskAlarm() {
	var reason error
	if n.IsLeader() {
		// The voters have an interval to answer, and a second at
		// least (as for creates): a shorter interval checks more
		// often, it does not make an answer due sooner.
		ctx, cancel := context.WithTimeout(n.life, max(n.cfg.DiskCheckInterval, time.Second))
		reason = n.checkVoterDisks(ctx, n.cfg.MinFreeDisk, "the %s minimum (--min-free-disk)")
		cancel()
	}
	if n.alarm.set(reason) {
		if reason != nil {
			n.log.Error("refusing writes: a voter is low on disk space", "err", reason)
		} else {
			n.log.Info("disk space alarm cleared: writes accepted again")
		}
	}
}

// checkVoterDisks asks every voter (itself included) for its free space
// and returns the refusal for the first one under min, or nil; under says
// what min is ("the %s minimum ..."). A voter that does not answer counts
// with its last answer for diskReportTTL, then not at all: it is not
// applying either.
func (n *Node) checkVoterDisks(ctx context.Context, min uint64, under string) error {
	servers, err := n.Servers()
	if err != nil {
		return nil
	}
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		id := string(s.ID)
		var free uint64
		var ok bool
		if id == n.id {
			free, ok = n.localFreeDisk()
		} else {
			if resp, err := n.peers.stats(ctx, n.serverAddr(s)); err == nil && resp.FreeDiskBytes != nil {
				free, ok = resp.GetFreeDiskBytes(), true
			}
		}
		if ok {
			n.alarm.report(id, free)
		} else {
			free, ok = n.alarm.lastReport(id)
		}
		if ok && free < min {
			return fmt.Errorf("%w: server %s has %s free for its data, under "+under+"; "+
				"free space on its data volume (delete namespaces or other files, or grow the volume) or lower the minimum; "+
				"writes resume by themselves and reads keep working",
				nodeapi.ErrStorageFull, id, mib(free), mib(min))
		}
	}
	return nil
}

// CreateReserve is the free space every voter must have for a namespace
// to be created, even with the disk alarm off (Config.MinFreeDisk 0): a
// create opens a database on every voter at once, and a voter that cannot
// stops applying until space is freed.
const CreateReserve = 16 << 20

// checkCreateSpace refuses a namespace create (nodeapi.ErrStorageFull)
// while the disk alarm is on, or while any voter has less than
// max(Config.MinFreeDisk, CreateReserve) free. It asks the voters now,
// not at the alarm's next check: creates are rare, and a burst of them
// should not fill a disk between two checks.
func (n *Node) checkCreateSpace(ctx context.Context) error {
	if err := n.alarm.err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if n.cfg.MinFreeDisk >= CreateReserve {
		return n.checkVoterDisks(ctx, n.cfg.MinFreeDisk, "the %s minimum (--min-free-disk)")
	}
	return n.checkVoterDisks(ctx, CreateReserve, "the %s a namespace create needs on every voter")
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// StorageStall says why the state machine is waiting for a resource it
// ran out of (file descriptors, disk space), for how long and what to
// free; nil when it is not. A stalled node applies nothing until the
// resource is free, then resumes by itself: /readyz reports it not ready.
func (n *Node) StorageStall() error {
	st, ok := n.store.Stall()
	if !ok {
		return nil
	}
	return fmt.Errorf("%w for %s: %v; %s", errStorageStalled, time.Since(st.Since).Round(time.Second), st.Err,
		fsm.ResourceAdvice(st.Err, n.cfg.DataDir))
}

// errStorageStalled starts StorageStall's answer.
var errStorageStalled = errors.New("node: the state machine is waiting for a resource")

// storageFailure explains a storage error raised inside apply (the state
// machine stops the node rather than skip an entry): what happened and
// what the operator should do.
func storageFailure(recovered any, dataDir string) string {
	err, _ := recovered.(error)
	what := fmt.Sprint(recovered)
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Sprintf("the state machine could not write an entry because the disk is full (%s); "+
			"the node stops so that replicas do not diverge: free space on the volume of %s and restart it; "+
			"it replays the Raft log from its last durable state, nothing acknowledged is lost", what, dataDir)
	}
	return fmt.Sprintf("the state machine could not write an entry (%s); "+
		"the node stops so that replicas do not diverge: check the disk of %s (space, permissions, errors in the system log) and restart it; "+
		"it replays the Raft log from its last durable state, nothing acknowledged is lost", what, dataDir)
}
