package rpc

import (
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/testutil"
)

// TestGroupLeavingConsumerParks (issue 31, item 20): a consumer leaving
// with a message in flight is a failed delivery like a nack or a timeout,
// also when it is the group's only consumer and the owner goes idle
// between one consumer and the next. A message whose every consumer takes
// it and leaves is delivered max_retries+1 times, numbered 1, 2, ..., then
// parked, and the checkpoint moves past it; it is not handed out forever
// with delivery 1.
func TestGroupLeavingConsumerParks(t *testing.T) {
	t.Parallel()
	cs, _ := clusterClients(t)
	appendMsgs(t, cs[0], "job-1", "Poison", 1) // global position 1
	for _, maxRetries := range []int32{0, 1, 2} {
		t.Run(fmt.Sprintf("max_retries %d", maxRetries), func(t *testing.T) {
			group := fmt.Sprintf("g%d", maxRetries)
			createGroup(t, cs[0], &skaldv1.CreateGroupRequest{Name: group, Source: &skaldv1.CreateGroupRequest_Stream{Stream: "job-1"},
				Settings: &skaldv1.GroupSettings{MaxRetries: proto.Int32(maxRetries)}})
			for i := range maxRetries + 1 {
				// On the leader and relayed through each follower in turn.
				tc := startConsumer(t, cs[int(i)%len(cs)], group, fmt.Sprintf("c%d", i))
				d := tc.next(t)
				if d.Message.GlobalPosition != 1 || d.Delivery != i+1 {
					t.Fatalf("consumer %d got position %d delivery %d, want position 1 delivery %d", i, d.Message.GlobalPosition, d.Delivery, i+1)
				}
				tc.stop()
				<-tc.done
				// The owner goes idle (no consumer left) before the next one
				// comes: the case where the count was forgotten.
				testutil.Eventually(t, waitTimeout, "the group's owner idle", func() bool {
					g, err := cs[0].subs.GetGroup(ctxT(t), connect.NewRequest(&skaldv1.GetGroupRequest{Name: group}))
					return err == nil && !g.Msg.Group.GetState().GetActive()
				})
			}
			var parked *skaldv1.ParkedMessage
			testutil.Eventually(t, waitTimeout, "the message parked", func() bool {
				p, err := cs[1].subs.ListParked(ctxT(t), connect.NewRequest(&skaldv1.ListParkedRequest{Group: group}))
				if err != nil || p.Msg.Total != 1 {
					return false
				}
				parked = p.Msg.Messages[0]
				return true
			})
			if parked.GlobalPosition != 1 || parked.Deliveries != maxRetries+1 || parked.Reason == "" {
				t.Fatalf("parked %v, want position 1 after %d deliveries", parked, maxRetries+1)
			}
			g, err := cs[2].subs.GetGroup(ctxT(t), connect.NewRequest(&skaldv1.GetGroupRequest{Name: group}))
			if err != nil || g.Msg.Group.Checkpoint != 2 || g.Msg.Group.Parked != 1 {
				t.Fatalf("group after parking: %v %v; want checkpoint 2, 1 parked", g, err)
			}
		})
	}
}
