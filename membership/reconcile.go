package membership

import (
	"context"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// reconcileLoop keeps Raft in step with gossip. Every node feeds the
// current Raft address of each member to the transport's address
// provider and refreshes its own metadata when its state changes; the
// leader also reconciles the Raft configuration.
func (m *Membership) reconcileLoop(ctx context.Context) {
	defer m.wg.Done()
	tick := time.NewTicker(m.cfg.ReconcileInterval)
	defer tick.Stop()
	hadState := m.node.HasState()
	piloting := false
	defer func() {
		if piloting {
			<-m.ap.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-m.kick:
		}
		members := m.Members()
		for _, mem := range members {
			if mem.ID != m.node.ID() && (mem.state == memberlist.StateAlive || mem.state == memberlist.StateSuspect) {
				m.node.SetPeerAddress(mem.ID, mem.RaftAddr)
			}
		}
		if has := m.node.HasState(); has != hadState {
			hadState = has
			if err := m.ml.UpdateNode(time.Second); err != nil {
				m.log.Warn("update gossip metadata", "err", err)
			}
		}
		leader := m.node.IsLeader()
		switch {
		case leader && !piloting:
			m.ap.Start(ctx)
			piloting = true
		case !leader && piloting:
			<-m.ap.Stop()
			piloting = false
		}
		if leader {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			m.reconcileLeader(rctx, members)
			cancel()
		} else {
			m.lastServers = nil // a later term starts without history
		}
	}
}

// reconcileLeader adds live members missing from the Raft configuration as
// non-voters (autopilot promotes them once stable), first removing a stale
// entry that holds the same address under another id; updates the address
// of a member that came back elsewhere; and registers every member's API
// address. Members that are gone (dead or left) are autopilot's: it
// removes them only while quorum stays safe. A graceful leave removes
// itself first (Membership.Leave).
func (m *Membership) reconcileLeader(ctx context.Context, members []member) {
	servers, err := m.node.Servers()
	if err != nil {
		return
	}
	byID := make(map[string]raft.Server, len(servers))
	byAddr := make(map[string]raft.Server, len(servers))
	for _, s := range servers {
		byID[string(s.ID)], byAddr[string(s.Address)] = s, s
	}
	m.noteRemovals(byID, members)
	m.forgetAddFailures(byID, members)
	self := m.node.ID()
	for _, mem := range members {
		switch mem.state {
		case memberlist.StateAlive:
			if mem.APIAddr != "" {
				if err := m.node.RegisterAPIAddress(ctx, mem.ID, mem.APIAddr); err != nil {
					m.log.Warn("register API address", "server", mem.ID, "err", err)
				}
			}
			if mem.ID == self {
				continue
			}
			if s, ok := byID[mem.ID]; ok {
				if string(s.Address) == mem.RaftAddr {
					continue
				}
				m.log.Info("server moved: updating its address", "server", mem.ID, "from", s.Address, "to", mem.RaftAddr)
				if s.Suffrage == raft.Voter {
					err = m.node.AddVoter(ctx, mem.ID, mem.RaftAddr)
				} else {
					err = m.node.AddNonvoter(ctx, mem.ID, mem.RaftAddr)
				}
				if err != nil {
					m.log.Warn("update server address", "server", mem.ID, "err", err)
				}
				continue
			}
			if at, ok := m.removedAt[mem.ID]; ok && time.Since(at) < rejoinDelay {
				// Removed moments ago while gossip still shows it alive:
				// a leave whose gossip broadcast has not arrived (or was
				// lost). Re-adding it would leave a non-voter behind that
				// no one runs.
				m.log.Info("not re-adding a server removed from the configuration moments ago", "server", mem.ID,
					"removed", time.Since(at).Round(time.Millisecond), "retry-after", rejoinDelay)
				continue
			}
			if old, ok := byAddr[mem.RaftAddr]; ok && string(old.ID) != mem.ID {
				m.log.Info("removing a stale server at the address of a joining one", "stale", old.ID, "address", mem.RaftAddr)
				if err := m.node.RemoveServer(ctx, string(old.ID)); err != nil {
					m.log.Warn("remove stale server", "server", old.ID, "err", err)
					continue
				}
			}
			m.addServer(ctx, mem)
		case memberlist.StateLeft:
			if _, ok := byID[mem.ID]; ok && mem.ID != self {
				m.log.Info("removing server that left", "server", mem.ID)
				if err := m.node.RemoveServer(ctx, mem.ID); err != nil {
					m.log.Warn("remove server that left", "server", mem.ID, "err", err)
				}
			}
		}
	}
}

// rejoinDelay is how long the leader waits before adding back a server
// that left the Raft configuration while gossip showed it alive: the case
// it exists for is a graceful leave (Membership.Leave), which broadcasts
// its gossip leave and then removes the server from Raft; under load the
// broadcast can arrive after the removal, or not at all, and the leader
// would add back a server that is going away. A server that left and is
// started again under its id joins after this delay; one that autopilot
// removed because it failed rejoins at once, even when it came back
// (a stall: SIGSTOP, a long GC pause, a VM freeze) before the leader's
// next reconcile saw it gone.
const rejoinDelay = 30 * time.Second

// noteRemovals records when servers left the configuration since the last
// reconcile while gossip showed them alive: a leave in progress (or a
// removal by hand). A server autopilot removed because it failed
// (pilot.RemoveFailedServer notes it before the removal can commit) is
// not recorded, whatever gossip shows now, so it is added back at once.
// Only the reconcile loop calls it. A new leader starts with no history:
// it sees removals made while it leads, and those it made itself
// (noteRemoved) even before its first reconcile.
func (m *Membership) noteRemovals(now map[string]raft.Server, members []member) {
	if m.removedAt == nil {
		m.removedAt = make(map[string]time.Time)
	}
	alive := make(map[string]bool, len(members))
	for _, mem := range members {
		alive[mem.ID] = mem.state == memberlist.StateAlive
	}
	m.mu.Lock()
	for id := range m.lastServers {
		if _, ok := now[id]; ok {
			continue
		}
		if _, failed := m.failed[id]; failed {
			delete(m.failed, id) // seen gone: a later removal is judged afresh
		} else if alive[id] {
			m.removedAt[id] = time.Now()
		}
	}
	for id, at := range m.failed {
		if time.Since(at) >= rejoinDelay { // its removal failed, or went unseen
			delete(m.failed, id)
		}
	}
	for id, at := range m.removed {
		if _, back := now[id]; !back {
			m.removedAt[id] = at
		}
		delete(m.removed, id)
	}
	m.mu.Unlock()
	for id, at := range m.removedAt {
		if _, back := now[id]; back || time.Since(at) >= rejoinDelay {
			delete(m.removedAt, id)
		}
	}
	m.lastServers = make(map[string]bool, len(now))
	for id := range now {
		m.lastServers[id] = true
	}
}

// noteRemoved hears a removal this node committed as leader
// (Node.NotifyRemovals): unless autopilot removed the server because it
// failed, it is a leave or a removal by hand, and the reconcile loop must
// not add the server back while gossip still shows it alive.
func (m *Membership) noteRemoved(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, failed := m.failed[id]; !failed {
		m.removed[id] = time.Now()
	}
}

// addFailure is the last failure to add a server, while it keeps failing.
type addFailure struct {
	err      string    // the error, as text
	logged   time.Time // when it was last logged at Warn
	attempts int       // failed attempts since then
}

// addFailureLogEvery is how often a server whose add keeps failing the
// same way is logged again: every reconcile (a second apart) retries it, and
// a refused joiner (an older version) would otherwise log twice a second
// until someone upgrades it.
const addFailureLogEvery = 5 * time.Minute

// addServer adds mem as a non-voter. A failure is logged at Warn when it
// is new or differs from the last, then at most every addFailureLogEvery
// (Debug in between); success after failures says how many there were.
func (m *Membership) addServer(ctx context.Context, mem member) {
	prev := m.addFailed[mem.ID]
	if prev == nil {
		m.log.Info("adding server as non-voter", "server", mem.ID, "name", mem.Name, "raft-addr", mem.RaftAddr)
	}
	err := m.node.AddNonvoter(ctx, mem.ID, mem.RaftAddr)
	if err == nil {
		if prev != nil {
			m.log.Info("added server as non-voter after failed attempts", "server", mem.ID, "name", mem.Name, "failed", prev.attempts)
			delete(m.addFailed, mem.ID)
		}
		return
	}
	now := time.Now()
	if prev != nil && prev.err == err.Error() && now.Sub(prev.logged) < addFailureLogEvery {
		prev.attempts++
		m.log.Debug("add server", "server", mem.ID, "err", err)
		return
	}
	if m.addFailed == nil {
		m.addFailed = make(map[string]*addFailure)
	}
	attempts := 1
	if prev != nil && prev.err == err.Error() {
		attempts = prev.attempts + 1
	}
	m.addFailed[mem.ID] = &addFailure{err: err.Error(), logged: now, attempts: attempts}
	m.log.Warn("add server", "server", mem.ID, "name", mem.Name, "raft-addr", mem.RaftAddr, "attempts", attempts,
		"err", err, "next-warning-in", addFailureLogEvery)
}

// forgetAddFailures drops the failures of servers that are in the
// configuration now or no longer alive in gossip.
func (m *Membership) forgetAddFailures(byID map[string]raft.Server, members []member) {
	if len(m.addFailed) == 0 {
		return
	}
	alive := make(map[string]bool, len(members))
	for _, mem := range members {
		alive[mem.ID] = mem.state == memberlist.StateAlive
	}
	for id := range m.addFailed {
		if _, in := byID[id]; in || !alive[id] {
			delete(m.addFailed, id)
		}
	}
}
