package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// Apply proposes cmd through Raft and returns the state machine's result:
// the Raft index of the entry and, set, the field of the Result oneof
// that answers cmd's kind (fsm.Kind.Result: GetAppend for an Append, ...).
// A business rejection (fsm.VersionConflictError, fsm.ValidationError,
// fsm.ErrNamespaceNotFound, ...) is returned as the error, and nothing was
// written.
//
// On a follower the command is forwarded to the leader. Without a leader
// the call waits up to Config.LeaderWait, then fails with
// nodeapi.ErrNoLeader (nothing proposed). A proposal Raft refuses before
// it reaches the log (see refusedBeforeLog: a leadership transfer in
// progress among others) is retried the same way. nodeapi.ErrUnknownOutcome
// means the write may have been applied. A forwarded write is retried only when it certainly was not
// proposed: the peer refused as not leader, or it could not be reached.
// Concurrent forwarded writes share calls to the leader (forwarder).
//
// Apply is the entry point of this node's API edge, which checked cmd
// against fsm.InputRules: it stamps them on cmd (unless set), so every
// replica applies the entry under the same rules. A command forwarded to
// this node keeps the rules of the node that took it (peer.go calls
// applyLocal).
func (n *Node) Apply(ctx context.Context, cmd *fsmv1.Command) (*fsmv1.Result, error) {
	if cmd.InputRules == fsm.InputRulesLegacy {
		cmd.InputRules = fsm.InputRules
	}
	k, ok := fsm.KindOf(cmd)
	if !ok {
		return nil, fmt.Errorf("%w: unknown command kind %T", fsm.ErrBadCommand, cmd.GetKind())
	}
	// Checked here too, not only by the leader: a leader of the previous
	// release would propose what some replicas cannot apply.
	if err := n.checkVersion(ctx, k); err != nil {
		return nil, err
	}
	var res *fsmv1.Result
	err := n.callLeader(ctx, leaderCall{
		local: func() (err error) {
			res, err = n.applyKind(ctx, cmd, k, true)
			return err
		},
		remote: func(ctx context.Context, addr string) (err error) {
			ctx, span := n.startSpan(ctx, "node.forward", trace.SpanKindClient)
			if span.IsRecording() {
				span.SetAttributes(attribute.String("skald.leader", addr))
			}
			defer func() { endSpan(span, err) }()
			forward := n.forward.apply
			if n.hooks.forward != nil {
				forward = n.hooks.forward
			}
			start := time.Now()
			if res, err = forward(ctx, addr, cmd); !errors.Is(err, errNotLeader) && !errors.Is(err, errNotSent) {
				n.m.forwardLatency.Observe(time.Since(start).Seconds())
			}
			return err
		},
		noLeader: func() error {
			n.m.refused.WithLabelValues(refusedNoLeader).Inc()
			return nodeapi.ErrNoLeader
		},
	})
	if err != nil {
		return nil, err
	}
	if !k.Answered(res) {
		return nil, fmt.Errorf("node: unexpected result %T for a %s", res.GetResult(), k.Name)
	}
	return res, nil
}

// applyLocal proposes cmd if this node is the leader; otherwise it returns
// errNotLeader without proposing anything.
// A business rejection is returned as the error.
func (n *Node) applyLocal(ctx context.Context, cmd *fsmv1.Command) (*fsmv1.Result, error) {
	k, known := fsm.KindOf(cmd)
	return n.applyKind(ctx, cmd, k, known)
}

// applyKind is applyLocal for cmd of kind k, looked up once per write by
// the caller (known false: cmd is of no kind this binary knows, refused
// as fsm.ErrBadCommand once this node is known to lead). Every check of
// the leader's before it proposes reads k: the disk-space alarm (k.MayGrow:
// deleting a namespace, streams or messages, expiry and retention
// policies free space, node info is membership's, and a leaked credential
// must be revocable, so those still go), the stamp and the version gate.
func (n *Node) applyKind(ctx context.Context, cmd *fsmv1.Command, k fsm.Kind, known bool) (_ *fsmv1.Result, err error) {
	if n.raft.State() != raft.Leader {
		return nil, errNotLeader
	}
	ctx, span := n.startSpan(ctx, "raft.propose", trace.SpanKindInternal)
	defer func() { endSpan(span, err) }()
	if !known {
		return nil, fmt.Errorf("%w: unknown command kind %T", fsm.ErrBadCommand, cmd.GetKind())
	}
	if err := n.alarm.err(); err != nil && k.MayGrow(cmd) {
		n.m.refused.WithLabelValues(refusedDiskFull).Inc()
		return nil, err // nothing proposed
	}
	stamp(k, cmd, time.Now())
	if err := n.checkVersion(ctx, k); err != nil {
		return nil, err // nothing proposed
	}
	release, err := n.checkSettingsRoom(cmd)
	if err != nil {
		return nil, err // nothing proposed
	}
	// A create in flight holds its place under the limit until it is
	// answered; if the caller gives up first, until Raft answers it.
	held := release
	defer func() { held() }()
	if c := cmd.GetCreateNamespace(); c != nil {
		// Apply enforces the leader's limit; and a create adds a database
		// on every voter at once: refuse it while one is nearly full.
		c.MaxNamespaces = n.cfg.MaxNamespaces
		if err := n.checkCreateSpace(ctx); err != nil {
			n.m.refused.WithLabelValues(refusedDiskSpace).Inc()
			return nil, err // nothing proposed
		}
		// Indexed by type from its first message when every server knows
		// the index (typeindex.go); else legacy until the backfill.
		c.IndexAllTypes = n.serversKnowSoon(ctx, 1)
	}
	var ext []byte
	if n.hooks.propose != nil {
		res, done, x, err := n.hooks.propose(cmd)
		if err != nil || done {
			return res, err
		}
		ext = x
	}
	data, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return nil, fmt.Errorf("node: encode command: %w", err)
	}
	start := time.Now()
	done := n.inflight.add(start)
	defer done()
	defer n.traceCommit(ctx, data, start)()
	f := n.raft.ApplyLog(raft.Log{Data: data, Extensions: ext}, n.cfg.ApplyTimeout)
	if n.hooks.proposed != nil {
		if res, ok := n.hooks.proposed(cmd); ok {
			return res, nil
		}
	}
	held = func() {} // released once Raft answers, whenever that is
	if err = waitFutureThen(ctx, f, release); ctx.Err() != nil && err == ctx.Err() {
		// The entry may still commit.
		return nil, fmt.Errorf("%w: %v", nodeapi.ErrUnknownOutcome, err)
	}
	n.m.applyLatency.Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
	case refusedBeforeLog(f, err):
		// Certainly not applied: Apply retries like not-leader, the peer
		// service tells the follower to.
		return nil, errNotLeader
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return nil, fmt.Errorf("%w: proposal queue full", nodeapi.ErrNoLeader)
	default:
		// ErrLeadershipLost, ErrRaftShutdown after dispatch, a log store
		// error, ...: it may be in the log and may still commit.
		return nil, fmt.Errorf("%w: %v", nodeapi.ErrUnknownOutcome, err)
	}
	switch r := f.Response().(type) {
	case error:
		return nil, r
	case *fsmv1.Result:
		// The state machine's answer as it is; the peer service carries
		// it the same way.
		return r, nil
	case nil:
		return nil, fmt.Errorf("node: entry %d was skipped by the state machine", f.Index())
	default:
		return nil, fmt.Errorf("node: entry %d: state machine answered %T", f.Index(), r)
	}
}

// refusedBeforeLog reports whether Raft answered f with err before the
// entry got an index, so it is certainly not in any log and never
// commits: the node was not the leader, was handing leadership over
// (ErrLeadershipTransferInProgress, every graceful handover and rolling
// restart), or was shut down before the proposal was queued (an error
// future, whose Index is 0; an entry Raft dispatched has an index >= 1
// and is answered ErrRaftShutdown only after it committed). f.Index is
// read only after f answered, so it does not race Raft's dispatch.
func refusedBeforeLog(f raft.ApplyFuture, err error) bool {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return true
	case errors.Is(err, raft.ErrRaftShutdown):
		return f.Index() == 0
	}
	return false
}

// stamp fills what the leader decides, as cmd's kind k says (fsm.Kind.Stamp:
// message ids the client did not give, UUIDv7, and the times), so apply
// is deterministic on every replica.
func stamp(k fsm.Kind, cmd *fsmv1.Command, now time.Time) {
	if k.Stamp != nil {
		k.Stamp(cmd, now.UnixNano(), newID)
	}
}

func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// Append is Apply for one append.
func (n *Node) Append(ctx context.Context, a *fsmv1.Append) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_Append{Append: a}})
}

// AppendMulti is Apply for one multi-stream append.
func (n *Node) AppendMulti(ctx context.Context, a *fsmv1.AppendMulti) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_AppendMulti{AppendMulti: a}})
}

// CreateNamespace is Apply for a namespace creation.
func (n *Node) CreateNamespace(ctx context.Context, c *fsmv1.CreateNamespace) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_CreateNamespace{CreateNamespace: c}})
}

// DeleteNamespace is Apply for a namespace deletion.
func (n *Node) DeleteNamespace(ctx context.Context, d *fsmv1.DeleteNamespace) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_DeleteNamespace{DeleteNamespace: d}})
}

// TruncateStream removes a stream's messages below a position.
func (n *Node) TruncateStream(ctx context.Context, c *fsmv1.TruncateStream) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_TruncateStream{TruncateStream: c}})
}

// DeleteByWatermark removes, in a category, each stream's messages up to
// its watermark.
func (n *Node) DeleteByWatermark(ctx context.Context, c *fsmv1.DeleteByWatermark) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_DeleteByWatermark{DeleteByWatermark: c}})
}

// DeleteStream removes a stream's messages, leaving a tombstone when hard.
func (n *Node) DeleteStream(ctx context.Context, c *fsmv1.DeleteStream) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_DeleteStream{DeleteStream: c}})
}

// Import is Apply for one import chunk.
func (n *Node) Import(ctx context.Context, i *fsmv1.Import) (*fsmv1.Result, error) {
	return n.Apply(ctx, &fsmv1.Command{Kind: &fsmv1.Command_Import{Import: i}})
}

// inflight tracks the start times of the leader's pending proposals.
type inflight struct {
	mu     sync.Mutex
	seq    uint64
	starts map[uint64]time.Time
}

func (f *inflight) add(t time.Time) (done func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.starts == nil {
		f.starts = make(map[uint64]time.Time)
	}
	f.seq++
	id := f.seq
	f.starts[id] = t
	return func() {
		f.mu.Lock()
		delete(f.starts, id)
		f.mu.Unlock()
	}
}

func (f *inflight) oldest() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var oldest time.Time
	for _, t := range f.starts {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	return oldest, !oldest.IsZero()
}

// watchdog hands leadership away when this leader's oldest pending
// proposal is older than Config.WatchdogTimeout: a leader whose disk
// stalls keeps heartbeating and is never replaced otherwise
// (hashicorp/raft #503).
func (n *Node) watchdog() {
	interval := max(n.cfg.WatchdogTimeout/10, 10*time.Millisecond)
	if n.cfg.WatchdogTimeout < 0 {
		interval = -1 // turned off
	}
	n.every(interval, nil, n.watchdogRound)
}

// watchdogRound is one round of watchdog.
func (n *Node) watchdogRound() {
	oldest, ok := n.inflight.oldest()
	if !ok || time.Since(oldest) < n.cfg.WatchdogTimeout || n.raft.State() != raft.Leader {
		return
	}
	n.log.Error("leader's proposals are stalled: transferring leadership", "oldest-pending", time.Since(oldest).String())
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.WatchdogTimeout)
	err := waitFuture(ctx, n.raft.LeadershipTransfer())
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		// Raft's own loop is stuck (a disk that does not return from
		// a write): only a restart of the process frees the cluster.
		n.log.Error("stalled leader cannot hand over leadership: restart this process", "waited", n.cfg.WatchdogTimeout.String())
	} else if err != nil {
		n.log.Error("watchdog leadership transfer failed", "err", err)
	}
}
