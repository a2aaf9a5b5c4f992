package rpc

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/rpc/gen/skald/v1/skaldv1connect"
)

// LeaderHeader names the leader's API address (host:port) on the reply to
// a write a follower forwarded, so a client can send its next writes
// there without the forward hop. Namespace tokens cannot call
// Cluster.Status; this is how their clients find the leader. A client
// must treat it as a hint: use it only for an address it already knows.
const LeaderHeader = "Skald-Leader"

// writeProcedures are the calls that go through the leader.
var writeProcedures = map[string]bool{
	skaldv1connect.EventStoreAppendProcedure: true,
	skaldv1connect.NamespacesCreateProcedure: true,
	skaldv1connect.NamespacesDeleteProcedure: true,
}

// leaderHint sets LeaderHeader on the replies (and errors) of writes
// served by a follower. The leader adds nothing: its replies cost no more.
type leaderHint struct{ b Backend }

func (h leaderHint) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		if !writeProcedures[req.Spec().Procedure] || h.b.IsLeader() {
			return resp, err
		}
		id, _ := h.b.Leader()
		addr, ok := h.b.NodeAddr(id)
		if id == "" || !ok {
			return resp, err
		}
		var ce *connect.Error
		switch {
		case err == nil:
			resp.Header().Set(LeaderHeader, addr)
		case errors.As(err, &ce):
			ce.Meta().Set(LeaderHeader, addr)
		}
		return resp, err
	}
}

func (h leaderHint) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (h leaderHint) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
