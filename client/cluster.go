package client

import (
	"context"
	"strings"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// ClusterStatus is one member's view of the cluster.
type ClusterStatus struct {
	NodeID, LeaderID          string
	Term                      uint64
	CommitIndex, AppliedIndex uint64
	Servers                   []Server
}

// Server is one member of the Raft configuration.
type Server struct {
	ID, Name                string
	RaftAddress, APIAddress string
	Voter                   bool
	// Healthy as autopilot judges it: on the leader autopilot's own
	// verdict, through any other member its rule applied to what each
	// server reports.
	Healthy bool
	// LastContact is the time since it last heard from the leader; -1
	// when unknown (it did not answer).
	LastContact  time.Duration
	AppliedIndex uint64
	// Unreachable: the serving member could not ask the server for its
	// progress (down, cut off, or overloaded); its role is unknown.
	Unreachable bool
}

// Status returns the cluster as one member sees it (admin token); the
// client also takes the members and the leader from it, unless Pinned.
func (c *Client) Status(ctx context.Context) (ClusterStatus, error) {
	var st *skaldv1.StatusResponse
	var from *member
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.cluster.Status(ctx, connect.NewRequest(&skaldv1.StatusRequest{}))
		if err == nil {
			st, from = r.Msg, m
		}
		return err
	})
	if err != nil {
		return ClusterStatus{}, err
	}
	if !c.cfg.Pinned {
		c.view.update(st, schemeOf(from.url))
	}
	out := ClusterStatus{NodeID: st.NodeId, LeaderID: st.LeaderId, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex}
	for _, s := range st.Servers {
		lc := time.Duration(-1)
		if s.LastContact != nil {
			lc = s.LastContact.AsDuration()
		}
		out.Servers = append(out.Servers, Server{
			ID: s.Id, Name: s.Name, RaftAddress: s.RaftAddress, APIAddress: s.ApiAddress,
			Voter: s.Suffrage == skaldv1.Suffrage_SUFFRAGE_VOTER, Healthy: s.Healthy,
			LastContact: lc, AppliedIndex: s.AppliedIndex, Unreachable: s.Unreachable,
		})
	}
	return out, nil
}

// TransferLeadership hands leadership to the voter toID ("" lets the
// leader pick one) and returns the new leader's id (admin token). It
// calls the leader, learning it from Cluster.Status; a Pinned client calls
// its endpoints only, and one that is not the leader refuses with
// ErrInvalidArgument (naming the leader).
func (c *Client) TransferLeadership(ctx context.Context, toID string) (string, error) {
	req := &skaldv1.TransferLeadershipRequest{}
	if toID != "" {
		req.ToId = &toID
	}
	var leader string
	err := c.onLeader(ctx, func(ctx context.Context, m *member) error {
		r, err := m.cluster.TransferLeadership(ctx, connect.NewRequest(req))
		if err == nil {
			leader = r.Msg.LeaderId
		}
		return err
	})
	c.disc.soon()
	return leader, err
}

// RemoveServer removes the member id from the Raft configuration (admin
// token).
func (c *Client) RemoveServer(ctx context.Context, id string) error {
	err := c.write(ctx, nil, func(ctx context.Context, m *member) error {
		_, err := m.cluster.RemoveServer(ctx, connect.NewRequest(&skaldv1.RemoveServerRequest{Id: id}))
		return err
	})
	c.disc.soon()
	return err
}

// Leave makes the member at endpoint (host:port or URL, as in
// Config.Endpoints) leave the cluster gracefully and stop: it hands over
// leadership, leaves the Raft configuration and gossip (admin token). It
// returns the member's id. The call is made to that member only, never
// retried elsewhere.
func (c *Client) Leave(ctx context.Context, endpoint string) (string, error) {
	if c.closed.Load() {
		return "", ErrClosed
	}
	url := strings.TrimSuffix(endpoint, "/")
	if !strings.Contains(url, "://") {
		url = c.disc.scheme + "://" + url
	}
	c.view.mu.Lock()
	m := c.view.memberLocked(url)
	c.view.mu.Unlock()
	r, err := m.cluster.Leave(ctx, connect.NewRequest(&skaldv1.LeaveRequest{}))
	c.disc.soon()
	if err != nil {
		if classify(err) == final {
			return "", serverError(url, asConnect(err))
		}
		kind := ErrUnavailable
		if classify(err) == unknown {
			kind = ErrUnknownOutcome
		}
		return "", &Error{Kind: kind, Endpoint: url, Err: err}
	}
	return r.Msg.NodeId, nil
}

// onLeader runs a call that only the leader serves (FailedPrecondition
// elsewhere): it refreshes the leader from Cluster.Status and tries again
// until the leader answers or ctx ends. A Pinned client cannot look for
// the leader: the member's FailedPrecondition is its answer.
func (c *Client) onLeader(ctx context.Context, try attempt) error {
	return c.write(ctx, nil, func(ctx context.Context, m *member) error {
		err := try(ctx, m)
		if connect.CodeOf(err) == connect.CodeFailedPrecondition && !c.cfg.Pinned {
			if rerr := c.disc.refresh(ctx); rerr != nil {
				return rerr
			}
			return &refusal{err} // not the leader: nothing was done
		}
		return err
	})
}
