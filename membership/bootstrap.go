package membership

import (
	"context"
	"sort"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// bootstrapLoop bootstraps the cluster once BootstrapExpect servers with
// the same expectation see each other and none has Raft state (Consul's
// maybeBootstrap). Every node of the group computes the same voter list
// from the members it sees, so the configurations agree; a node with
// state never bootstraps, and a member with state means an existing
// cluster (its leader adds this node instead).
func (m *Membership) bootstrapLoop(ctx context.Context) {
	defer m.wg.Done()
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.cfg.ReconcileInterval):
		}
		if m.node.HasState() {
			return
		}
		var peers []member
		conflict := false
		existing := false
		for _, mem := range m.Members() {
			if mem.state != memberlist.StateAlive {
				continue
			}
			switch {
			case mem.HasState && mem.ID != m.node.ID():
				existing = true
			case mem.Expect != 0 && mem.Expect != m.cfg.BootstrapExpect:
				conflict = true
				if !warned {
					m.log.Error("refusing to bootstrap: a member expects a different cluster size",
						"member", mem.ID, "its-bootstrap-expect", mem.Expect, "our-bootstrap-expect", m.cfg.BootstrapExpect)
					warned = true
				}
			case mem.Expect == m.cfg.BootstrapExpect:
				peers = append(peers, mem)
			}
		}
		if existing {
			m.log.Info("found members with Raft state: joining the existing cluster instead of bootstrapping")
			return
		}
		if conflict || len(peers) < m.cfg.BootstrapExpect {
			continue
		}
		sort.Slice(peers, func(i, j int) bool { return peers[i].ID < peers[j].ID })
		servers := make([]raft.Server, len(peers))
		for i, p := range peers {
			servers[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)}
		}
		if err := m.node.BootstrapCluster(servers); err != nil {
			m.log.Error("bootstrap failed", "err", err)
			continue
		}
		m.log.Info("bootstrapped the cluster", "servers", len(servers))
		m.trigger()
		return
	}
}
