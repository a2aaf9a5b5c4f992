package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/skalddb/skald/node/nodeapi"
	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

// members is what the Cluster handlers need from the node.
type members interface {
	ID() string
	Leader() (id, raftAddr string)
	IsLeader() bool
	Status() nodeapi.Status
	Members() ([]nodeapi.Member, error)
	AppliedIndex() uint64
	ServerAppliedIndex(ctx context.Context, id string) (uint64, error)
	NodeAddr(id string) (string, bool)
	NodeAddrs() map[string]string
	TransferLeadership(ctx context.Context, id string) error
	RemoveServer(ctx context.Context, id string) error
}

type cluster struct {
	b      members
	log    *slog.Logger
	health func(id string) (healthy bool, lastContact time.Duration, ok bool)
	leave  func(ctx context.Context) error
}

func (s *cluster) Status(ctx context.Context, _ *connect.Request[skaldv1.StatusRequest]) (*connect.Response[skaldv1.StatusResponse], error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	st := s.b.Status()
	leader := st.LeaderID
	resp := &skaldv1.StatusResponse{
		NodeId: st.ID, LeaderId: leader, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
	}
	servers, err := s.b.Members()
	if err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	apis := s.b.NodeAddrs()
	for _, srv := range servers {
		out := &skaldv1.Server{Id: srv.ID, RaftAddress: srv.RaftAddr, ApiAddress: apis[srv.ID], Suffrage: skaldv1.Suffrage_SUFFRAGE_VOTER}
		if !srv.Voter {
			out.Suffrage = skaldv1.Suffrage_SUFFRAGE_NONVOTER
		}
		// Autopilot (on the leader) judges every server; otherwise this
		// node reports its own.
		if s.health != nil {
			if healthy, lc, ok := s.health(srv.ID); ok {
				out.Healthy, out.LastContact = healthy, durationpb.New(lc)
			}
		}
		if srv.ID == st.ID {
			out.AppliedIndex = s.b.AppliedIndex()
			if out.LastContact == nil {
				out.Healthy = leader != ""
			}
			if srv.ID != leader {
				if lc := st.LastContact; !lc.IsZero() {
					out.LastContact = durationpb.New(time.Since(lc))
				}
			} else {
				out.LastContact = durationpb.New(0)
			}
		}
		resp.Servers = append(resp.Servers, out)
	}
	s.askAppliedIndexes(ctx, resp.Servers)
	return connect.NewResponse(resp), nil
}

// statusAskTimeout bounds asking one server for its applied index.
const statusAskTimeout = time.Second

// askAppliedIndexes fills the applied index of every other server with a
// known API address by asking it, all at once; a server that does not
// answer in time keeps 0 (unknown) and is logged.
func (s *cluster) askAppliedIndexes(ctx context.Context, servers []*skaldv1.Server) {
	ctx, cancel := context.WithTimeout(ctx, statusAskTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, srv := range servers {
		if srv.Id == s.b.ID() || srv.ApiAddress == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx, err := s.b.ServerAppliedIndex(ctx, srv.Id)
			if err != nil {
				s.log.Debug("cluster status: applied index unknown", "server", srv.Id, "err", err)
				return
			}
			srv.AppliedIndex = idx
		}()
	}
	wg.Wait()
}

// notLeader reports that a membership change must be made on the leader.
func (s *cluster) notLeader() error {
	leader, _ := s.b.Leader()
	addr, _ := s.b.NodeAddr(leader)
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("this node is not the leader; call the leader at %q", addr))
}

func (s *cluster) TransferLeadership(ctx context.Context, req *connect.Request[skaldv1.TransferLeadershipRequest]) (*connect.Response[skaldv1.TransferLeadershipResponse], error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if !s.b.IsLeader() {
		return nil, s.notLeader()
	}
	if err := s.b.TransferLeadership(ctx, req.Msg.GetToId()); errors.Is(err, nodeapi.ErrUnknownServer) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("to_id: no server %q in the cluster (see Cluster.Status)", req.Msg.GetToId()))
	} else if err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	leader, err := s.newLeader(ctx)
	if err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	return connect.NewResponse(&skaldv1.TransferLeadershipResponse{LeaderId: leader}), nil
}

// newLeaderWait bounds the wait for a successor when the caller set no
// deadline.
const newLeaderWait = 10 * time.Second

// newLeader waits until this former leader has heard from its successor
// (right after a handover it knows no leader) and returns the successor's
// id.
func (s *cluster) newLeader(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, newLeaderWait)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if id, _ := s.b.Leader(); id != "" && id != s.b.ID() {
			return id, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w: leadership was handed over, but no new leader is known yet: %w", nodeapi.ErrNoLeader, ctx.Err())
		case <-tick.C:
		}
	}
}

func (s *cluster) RemoveServer(ctx context.Context, req *connect.Request[skaldv1.RemoveServerRequest]) (*connect.Response[skaldv1.RemoveServerResponse], error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if req.Msg.Id == "" {
		return nil, invalidField("id", "must not be empty")
	}
	// The node forwards the change to the leader, which refuses an id
	// its configuration does not hold.
	if err := s.b.RemoveServer(ctx, req.Msg.Id); errors.Is(err, nodeapi.ErrUnknownServer) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("id: no server %q in the cluster (see Cluster.Status)", req.Msg.Id))
	} else if err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	return connect.NewResponse(&skaldv1.RemoveServerResponse{}), nil
}

func (s *cluster) Leave(ctx context.Context, _ *connect.Request[skaldv1.LeaveRequest]) (*connect.Response[skaldv1.LeaveResponse], error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if s.leave == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("this node does not run gossip membership (no --join or --bootstrap-expect)"))
	}
	if err := s.leave(ctx); err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	return connect.NewResponse(&skaldv1.LeaveResponse{NodeId: s.b.ID()}), nil
}
