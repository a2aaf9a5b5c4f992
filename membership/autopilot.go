package membership

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	autopilot "github.com/hashicorp/raft-autopilot"
)

// pilot is raft-autopilot's view of the application: the servers gossip
// knows, their Raft progress (fetched from each over the peer service),
// and how to remove a failed one.
type pilot struct{ m *Membership }

func (p *pilot) AutopilotConfig() *autopilot.Config {
	c := p.m.cfg
	return &autopilot.Config{
		CleanupDeadServers:      c.CleanupDeadServers,
		LastContactThreshold:    c.LastContactThreshold,
		MaxTrailingLogs:         c.MaxTrailingLogs,
		MinQuorum:               c.MinQuorum,
		ServerStabilizationTime: c.ServerStabilizationTime,
	}
}

func (p *pilot) NotifyState(*autopilot.State) {}

func (p *pilot) KnownServers() map[raft.ServerID]*autopilot.Server {
	leaderID, _ := p.m.node.Leader()
	leader := raft.ServerID(leaderID)
	out := make(map[raft.ServerID]*autopilot.Server)
	for _, mem := range p.m.Members() {
		status := autopilot.NodeUnknown
		switch mem.state {
		case memberlist.StateAlive, memberlist.StateSuspect:
			status = autopilot.NodeAlive
		case memberlist.StateDead:
			status = autopilot.NodeFailed
		case memberlist.StateLeft:
			status = autopilot.NodeLeft
		}
		id := raft.ServerID(mem.ID)
		out[id] = &autopilot.Server{
			ID: id, Name: mem.Name, Address: raft.ServerAddress(mem.RaftAddr), NodeStatus: status,
			RaftVersion: raft.ProtocolVersionMax, IsLeader: id == leader, NodeType: autopilot.NodeVoter,
			Meta: map[string]string{"api": mem.APIAddr},
		}
	}
	return out
}

func (p *pilot) FetchServerStats(ctx context.Context, servers map[raft.ServerID]*autopilot.Server) map[raft.ServerID]*autopilot.ServerStats {
	out := make(map[raft.ServerID]*autopilot.ServerStats, len(servers))
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for id, srv := range servers {
		if srv.NodeStatus != autopilot.NodeAlive {
			continue
		}
		wg.Add(1)
		go func(id raft.ServerID) {
			defer wg.Done()
			lc, term, idx, err := p.m.node.ServerStats(ctx, string(id))
			if err != nil {
				return
			}
			mu.Lock()
			out[id] = &autopilot.ServerStats{LastContact: lc, LastTerm: term, LastIndex: idx}
			mu.Unlock()
		}(id)
	}
	wg.Wait()
	return out
}

func (p *pilot) RemoveFailedServer(srv *autopilot.Server) {
	m := p.m
	m.mu.Lock()
	if m.removing[srv.ID] {
		m.mu.Unlock()
		return
	}
	m.removing[srv.ID] = true
	// Noted before the removal can commit, so the reconcile loop never
	// takes it for a leave (reconcile.go, noteRemovals).
	m.failed[string(srv.ID)] = time.Now()
	m.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.log.Info("removing failed server", "server", srv.ID, "name", srv.Name)
		if err := m.node.RemoveServer(ctx, string(srv.ID)); err != nil {
			// It may have committed all the same: the note stays until
			// the reconcile loop sees the server go or it ages out.
			m.log.Warn("remove failed server", "server", srv.ID, "err", err)
		}
		m.mu.Lock()
		delete(m.removing, srv.ID)
		m.mu.Unlock()
	}()
}
