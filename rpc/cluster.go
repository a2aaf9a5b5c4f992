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

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/node/nodeapi"
)

// members is what the Cluster handlers need from the node.
type members interface {
	ID() string
	Leader() (id, raftAddr string)
	IsLeader() bool
	Status() nodeapi.Status
	Members() ([]nodeapi.Member, error)
	ServerProgress(ctx context.Context, id string) (nodeapi.Progress, error)
	NodeAddr(id string) (string, bool)
	NodeAddrs() map[string]string
	TransferLeadership(ctx context.Context, id string) error
	RemoveServer(ctx context.Context, id string) error
}

type cluster struct {
	b   members
	log *slog.Logger
	// health is autopilot's verdict on a server (ok false when it has
	// none: autopilot runs on the leader only); rule judges the others.
	health func(id string) (healthy bool, lastContact time.Duration, ok bool)
	rule   nodeapi.HealthRule
	// names gives a server's --node-name ("" when unknown); name is
	// this node's.
	names func(id string) string
	name  string
	leave func(ctx context.Context) error
}

// Status reports the Raft configuration with what each server says of
// itself (asked over the cluster port, all at once, within a second) and
// its health: autopilot's verdict where this node leads and has one,
// otherwise autopilot's rule applied here to what the server and the
// leader reported. So a follower shows the live leader and the others
// as the leader does (it used to mark every other server unhealthy), and
// a server that did not answer is marked unreachable. When the leader
// does not answer, the others are judged against the freshest answer
// (reference).
func (s *cluster) Status(ctx context.Context, _ *connect.Request[skaldv1.StatusRequest]) (*connect.Response[skaldv1.StatusResponse], error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	st := s.b.Status()
	resp := &skaldv1.StatusResponse{
		NodeId: st.ID, LeaderId: st.LeaderID, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
	}
	servers, err := s.b.Members()
	if err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	progress := s.askProgress(ctx, servers)
	leader, leaderAnswered := reference(progress, st.LeaderID)
	apis := s.b.NodeAddrs()
	for _, srv := range servers {
		out := &skaldv1.Server{Id: srv.ID, Name: s.nameOf(srv.ID), RaftAddress: srv.RaftAddr, ApiAddress: apis[srv.ID], Suffrage: skaldv1.Suffrage_SUFFRAGE_VOTER}
		if !srv.Voter {
			out.Suffrage = skaldv1.Suffrage_SUFFRAGE_NONVOTER
		}
		p, answered := progress[srv.ID]
		out.Unreachable = !answered
		if answered {
			out.AppliedIndex = p.AppliedIndex
			if p.LastContact >= 0 {
				out.LastContact = durationpb.New(p.LastContact)
			}
			out.Healthy = leaderAnswered && s.rule.Healthy(p, leader)
		}
		if s.health != nil {
			if healthy, lc, ok := s.health(srv.ID); ok {
				out.Healthy, out.LastContact = healthy, durationpb.New(lc)
			}
		}
		resp.Servers = append(resp.Servers, out)
	}
	return connect.NewResponse(resp), nil
}

// reference is the progress the others are judged against: the leader's
// when it answered; else (this node cannot reach the leader, or knows
// none) the freshest answer, the highest term and then the longest log,
// so servers that still hear from a leader show healthy instead of every
// server showing unhealthy for this node's own trouble. ok is false when
// nobody answered.
func reference(progress map[string]nodeapi.Progress, leaderID string) (ref nodeapi.Progress, ok bool) {
	if p, answered := progress[leaderID]; answered && leaderID != "" {
		return p, true
	}
	for _, p := range progress {
		if !ok || p.Term > ref.Term || (p.Term == ref.Term && p.LastIndex > ref.LastIndex) {
			ref, ok = p, true
		}
	}
	return ref, ok
}

// nameOf is server id's --node-name, "" when unknown.
func (s *cluster) nameOf(id string) string {
	if s.names != nil {
		if name := s.names(id); name != "" {
			return name
		}
	}
	if id == s.b.ID() {
		return s.name
	}
	return ""
}

// statusAskTimeout bounds asking one server for its progress.
const statusAskTimeout = time.Second

// askProgress asks every server for its progress, all at once, and
// returns the answers by id; a server that does not answer in time is
// missing (and logged at debug). This node answers for itself locally.
func (s *cluster) askProgress(ctx context.Context, servers []nodeapi.Member) map[string]nodeapi.Progress {
	ctx, cancel := context.WithTimeout(ctx, statusAskTimeout)
	defer cancel()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		out = make(map[string]nodeapi.Progress, len(servers))
	)
	for _, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.b.ServerProgress(ctx, srv.ID)
			if err != nil {
				s.log.Debug("cluster status: server did not answer", "server", srv.ID, "err", err)
				return
			}
			mu.Lock()
			out[srv.ID] = p
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
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
