package rpc

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
)

// LeaderHeader names the leader's API address (host:port) on the reply to
// a write a follower forwarded, so a client can send its next writes
// there without the forward hop. Namespace tokens cannot call
// Cluster.Status; this is how their clients find the leader. A client
// must treat it as a hint: use it only for an address it already knows.
const LeaderHeader = "Skald-Leader"

// throughLeader are the procedures a follower serves through the leader
// (it forwards or relays them) or refuses as not the leader's: their
// replies and errors from a follower carry LeaderHeader. Every other
// procedure is in servedLocally. TestEveryProcedureIsClassified fails when
// a procedure is in neither, so a new write cannot miss the hint.
var throughLeader = map[string]bool{
	skaldv1connect.EventStoreAppendProcedure:            true,
	skaldv1connect.EventStoreAppendMultiProcedure:       true,
	skaldv1connect.EventStoreAppendStreamProcedure:      true, // each request forwarded; its errors name the leader too
	skaldv1connect.EventStoreDeleteStreamProcedure:      true,
	skaldv1connect.EventStoreTruncateStreamProcedure:    true,
	skaldv1connect.EventStoreDeleteByWatermarkProcedure: true,

	skaldv1connect.NamespacesCreateProcedure:             true,
	skaldv1connect.NamespacesDeleteProcedure:             true,
	skaldv1connect.NamespacesSetRetentionPolicyProcedure: true,

	skaldv1connect.SubscriptionsCreateGroupProcedure:  true,
	skaldv1connect.SubscriptionsUpdateGroupProcedure:  true,
	skaldv1connect.SubscriptionsDeleteGroupProcedure:  true,
	skaldv1connect.SubscriptionsConsumeProcedure:      true, // relayed to the group's owner, the leader
	skaldv1connect.SubscriptionsAckProcedure:          true,
	skaldv1connect.SubscriptionsNackProcedure:         true,
	skaldv1connect.SubscriptionsReplayParkedProcedure: true,
	skaldv1connect.SubscriptionsDeleteParkedProcedure: true,
	skaldv1connect.ClusterRemoveServerProcedure:       true,
	skaldv1connect.ClusterTransferLeadershipProcedure: true, // refused by a follower, naming the leader
	skaldv1connect.CredentialsCreateProcedure:         true,
	skaldv1connect.CredentialsRevokeProcedure:         true,

	skaldv1connect.IndexesCreateProcedure:  true,
	skaldv1connect.IndexesDeleteProcedure:  true,
	skaldv1connect.IndexesRebuildProcedure: true,
	skaldv1connect.IndexesPauseProcedure:   true,
	skaldv1connect.IndexesResumeProcedure:  true,
}

// servedLocally are the procedures any node answers itself: reads at the
// consistency level asked for, and the node's own status and leave.
var servedLocally = map[string]bool{
	skaldv1connect.EventStoreQueryProcedure:          true,
	skaldv1connect.EventStoreReadStreamProcedure:     true,
	skaldv1connect.EventStoreReadCategoryProcedure:   true,
	skaldv1connect.EventStoreReadAllProcedure:        true,
	skaldv1connect.EventStoreLastMessageProcedure:    true,
	skaldv1connect.EventStoreStreamVersionProcedure:  true,
	skaldv1connect.EventStoreListStreamsProcedure:    true,
	skaldv1connect.EventStoreListCategoriesProcedure: true,
	skaldv1connect.EventStoreSubscribeProcedure:      true,

	skaldv1connect.NamespacesListProcedure:                  true,
	skaldv1connect.NamespacesGetProcedure:                   true,
	skaldv1connect.NamespacesListRetentionPoliciesProcedure: true,

	skaldv1connect.SubscriptionsGetGroupProcedure:   true,
	skaldv1connect.SubscriptionsListGroupsProcedure: true,
	skaldv1connect.SubscriptionsListParkedProcedure: true,
	skaldv1connect.ClusterStatusProcedure:           true,
	skaldv1connect.ClusterLeaveProcedure:            true,
	skaldv1connect.CredentialsListProcedure:         true,

	skaldv1connect.IndexesListProcedure:  true,
	skaldv1connect.IndexesInfoProcedure:  true,
	skaldv1connect.IndexesQueryProcedure: true,
}

// leaderHint sets LeaderHeader on the replies (and errors) of writes
// served by a follower. The leader adds nothing: its replies cost no more.
type leaderHint struct{ b Backend }

func (h leaderHint) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		addr, ok := h.hint(req.Spec().Procedure)
		if !ok {
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

// hint returns the leader's API address when procedure goes through the
// leader and this node is not it.
func (h leaderHint) hint(procedure string) (string, bool) {
	if !throughLeader[procedure] || h.b.IsLeader() {
		return "", false
	}
	id, _ := h.b.Leader()
	addr, ok := h.b.NodeAddr(id)
	return addr, id != "" && ok
}

func (h leaderHint) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler names the leader in the response headers of a
// stream relayed to it (Consume through a follower), sent with the
// stream's first message or its end.
func (h leaderHint) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if addr, ok := h.hint(conn.Spec().Procedure); ok {
			conn.ResponseHeader().Set(LeaderHeader, addr)
		}
		return next(ctx, conn)
	}
}
