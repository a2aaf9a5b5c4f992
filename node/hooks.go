package node

import (
	"context"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// hooks are the points where the chaos harness's mutants change what a
// node does (mutant_on.go, compiled only with -tags mutants, sets them
// from Config.Mutant). In every other binary each field stays nil, and the
// write and read paths only test for that.
type hooks struct {
	// forward, when set, sends a write this node does not lead to the
	// leader at addr in place of the forwarder.
	forward func(ctx context.Context, addr string, cmd *fsmv1.Command) (*fsmv1.Result, error)
	// propose sees every command the leader is about to encode: it may
	// refuse it (err), answer it without proposing (done, res), or give
	// the Raft entry extensions (ext) for the state machine's mutant side.
	propose func(cmd *fsmv1.Command) (res *fsmv1.Result, done bool, ext []byte, err error)
	// proposed sees a command just handed to Raft and may answer it
	// before it commits.
	proposed func(cmd *fsmv1.Command) (res *fsmv1.Result, done bool)
	// skipReadBarrier reports that a read at c may skip its wait.
	skipReadBarrier func(c nodeapi.Consistency) bool
	// groupCheckpoint, when set, replaces the checkpoint a subscription
	// group saves (the lowest unsettled global position) given its read
	// position.
	groupCheckpoint func(lowest, read int64) int64
}
