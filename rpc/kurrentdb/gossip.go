package kurrentdb

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/gossip"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
)

// memberSpace makes a member's instance id from its Skald id: the same
// on every node and across restarts.
var memberSpace = uuid.MustParse("6b1c3e52-8c1a-4c4f-9d7e-3f0a2b5c9e11")

// gossip answers Gossip.Read, anonymously (the clients discover the
// cluster without credentials): every member of the Raft configuration
// whose KurrentDB address is known, the leader this node knows as
// Leader, the others as Follower. Clients pick the Leader and dial its
// address; with no leader known every member is a Follower, and a client
// that needs the leader tries again.
func (s *Server) gossip(context.Context, *connect.Request[shared.Empty]) (
	*connect.Response[gossip.ClusterInfo], error) {
	members, err := s.cluster.Members()
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("read the cluster's members: %w", err))
	}
	leader := s.cluster.Status().LeaderID
	apis := s.cluster.NodeAddrs()
	now := time.Now().UnixNano() / 100
	out := &gossip.ClusterInfo{}
	for _, m := range members {
		api, ok := apis[m.ID]
		if !ok {
			continue
		}
		addr, ok := s.opts.Endpoint(m.ID, api)
		if !ok {
			continue
		}
		host, portText, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil {
			continue
		}
		state := gossip.MemberInfo_Follower
		if m.ID == leader {
			state = gossip.MemberInfo_Leader
		}
		id := uuid.NewSHA1(memberSpace, []byte(m.ID))
		out.Members = append(out.Members, &gossip.MemberInfo{
			InstanceId: protoID(id.String(), true), TimeStamp: now, State: state, IsAlive: true,
			HttpEndPoint: &gossip.EndPoint{Address: host, Port: uint32(port)},
		})
	}
	return connect.NewResponse(out), nil
}
