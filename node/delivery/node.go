package delivery

import (
	"context"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// Node is what the delivery engine needs of the cluster member it runs on.
// Package node implements it over its Raft and state machine.
type Node interface {
	// Owning reports whether this node may own groups now: it is the
	// leader and its Barrier of this term completed, so its state holds
	// every entry committed before the term (every saved checkpoint).
	Owning() bool
	// View opens a read view of namespace ns's committed state; the
	// caller closes it.
	View(ns string) (*fsm.View, error)
	// Watch starts watching ns's change feed: a dispatcher wakes at
	// every commit to the namespace, group commands included.
	Watch(ns string) *nodeapi.Watch
	// Propose proposes cmd on this node, the leader, and returns its
	// result once applied; it fails without proposing when this node is
	// not the leader. A business rejection is the error.
	Propose(ctx context.Context, cmd *fsmv1.Command) (*fsmv1.Result, error)
}

// Config is how the engine behaves on its node.
type Config struct {
	// NotOwner is the error every call returns when Node.Owning does not
	// hold, and that a dispatcher stops with when leadership goes or its
	// save fails (wrapped): the node's own not-leader error, so that its
	// callers attach again to whoever owns the groups now.
	NotOwner error
	// ApplyTimeout bounds one progress save.
	ApplyTimeout time.Duration
	// Heartbeat is the idle interval after which Consume calls its
	// heartbeat.
	Heartbeat time.Duration
	// Checkpoint, when set, replaces the checkpoint a group saves (the
	// lowest unsettled global position) given its read position. Only the
	// chaos harness's mutants set it.
	Checkpoint func(lowest, read int64) int64
}
