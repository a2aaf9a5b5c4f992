package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// The version gate decides whether every server of the configuration,
// voters and non-voters, applies the kinds of a state machine version
// (fsm.Kind.Version, fsm.StateMachineVersion). It decides from what each
// server last reported, as recorded in the replicated state
// (SetNodeInfo.state_machine_version, fsm.Store.NodeVersion), not from
// who answers now: a server recorded at v or above is known to apply v
// whether it is up, down or paused, and is not asked. Only a server with
// no record, or one below v, is asked (peer Stats, within a second of the
// call): it may have been upgraded since. One that answers below v, or
// does not answer, blocks v, and the refusal names it and what it last
// reported. Every node reads its own replica of the records, so a node
// that restarted while a peer is down still knows what that peer said.
//
// The leader keeps the records: when it gains leadership, when the gate
// or a registration hears of a server the record does not match, and
// every Config.VersionInterval, it asks every server and proposes a
// SetNodeInfo for each whose answer differs from its record (nothing for
// one that does not answer: its record stays as it was).
//
// INVARIANT: a record is a version the server reported, so the server
// applies every kind up to it, for as long as it is not downgraded. A
// downgrade is not supported: the record is lowered at the downgraded
// server's first answer to the leader, and until then the gate lets
// through kinds the server cannot apply (remove a server from the
// configuration before downgrading it).

// versionAsk bounds how long the gate waits for the servers it must ask.
const versionAsk = time.Second

// checkVersion refuses a kind some server of the configuration is not
// known to apply (fsm.Kind.Version): a rolling upgrade never puts in the
// log an entry a replica would refuse. The node that takes the call checks
// (a leader of the previous release might not) and the leader again.
func (n *Node) checkVersion(ctx context.Context, k fsm.Kind) error {
	if k.Version == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, versionAsk)
	defer cancel()
	reason := n.versionBlocker(ctx, k.Version)
	if reason == "" {
		return nil
	}
	n.m.refused.WithLabelValues(refusedVersion).Inc()
	return fmt.Errorf("%w: %s needs state machine version %d on every server, and %s",
		nodeapi.ErrUpgradeRequired, k.Name, k.Version, reason)
}

// serversKnow reports whether every server of the configuration is known
// to apply state machine version v (the gate's decision, without the
// reason).
func (n *Node) serversKnow(ctx context.Context, v uint32) bool { return n.versionBlocker(ctx, v) == "" }

// serversKnowSoon is serversKnow asking for at most a second: a create
// does not wait longer for a server that does not answer.
func (n *Node) serversKnowSoon(ctx context.Context, v uint32) bool {
	ctx, cancel := context.WithTimeout(ctx, versionAsk)
	defer cancel()
	return n.serversKnow(ctx, v)
}

// versionBlocker returns "" when every server of the configuration is
// known to apply version v, else why not, naming the first server that
// blocks it and what it last reported. Servers recorded at v or above are
// not asked.
func (n *Node) versionBlocker(ctx context.Context, v uint32) string {
	if fsm.StateMachineVersion < v {
		return fmt.Sprintf("this server (%q) runs state machine version %d: upgrade it", n.id, fsm.StateMachineVersion)
	}
	servers, err := n.Servers()
	if err != nil {
		return fmt.Sprintf("the Raft configuration cannot be read (%v)", err)
	}
	for _, s := range servers {
		id := string(s.ID)
		if id == n.id {
			continue
		}
		recorded, ok := n.store.NodeVersion(id)
		if ok && recorded >= v {
			continue
		}
		resp, err := n.peers.stats(ctx, n.serverAddr(s))
		if err == nil && (!ok || resp.GetStateMachineVersion() != recorded) {
			n.kickVersions() // it answers what the record does not say
		}
		switch {
		case err != nil && ok:
			return fmt.Sprintf("server %q does not answer (%v); it last reported state machine version %d: "+
				"bring it back upgraded, or remove it from the cluster", id, err, recorded)
		case err != nil:
			return fmt.Sprintf("server %q does not answer (%v) and the cluster has no state machine version "+
				"recorded for it: bring it back, or remove it from the cluster", id, err)
		case resp.GetStateMachineVersion() < v:
			return fmt.Sprintf("server %q reports state machine version %d: upgrade it first",
				id, resp.GetStateMachineVersion())
		}
	}
	return ""
}

// kickVersions asks the leader's version loop for a round now (a no-op
// on a follower, whose loop waits).
func (n *Node) kickVersions() {
	select {
	case n.versionKick <- struct{}{}:
	default:
	}
}

// versionLoop keeps the records of the servers' versions while this node
// leads: a round every Config.VersionInterval and whenever kicked.
func (n *Node) versionLoop() {
	n.every(n.cfg.VersionInterval, n.versionKick, func() {
		if n.raft.State() == raft.Leader {
			n.versionRound()
		}
	})
}

// versionRound asks every server of the configuration for its version,
// at once (a paused server holds back no other), and records each answer
// that differs from the record.
func (n *Node) versionRound() {
	servers, err := n.Servers()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(n.life, versionAsk)
	defer cancel()
	reported := make([]uint32, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		if string(s.ID) == n.id {
			reported[i] = n.stateMachineVersion()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := n.peers.stats(ctx, n.serverAddr(s)); err == nil {
				reported[i] = resp.GetStateMachineVersion()
			}
		}()
	}
	wg.Wait()
	for i, s := range servers {
		if v := reported[i]; v > 0 {
			if err := n.recordVersion(n.life, string(s.ID), v); err != nil {
				n.log.Debug("record a server's state machine version", "server", s.ID, "version", v, "err", err)
			}
		}
	}
}

// recordVersion proposes, as the leader, that server id last reported
// state machine version v, unless that is its record already. The entry
// carries the server's registered API address, which an older replica
// sets again; a server without one is recorded once it registers.
func (n *Node) recordVersion(ctx context.Context, id string, v uint32) error {
	n.nodeInfoMu.Lock()
	defer n.nodeInfoMu.Unlock()
	if cur, ok := n.store.NodeVersion(id); ok && cur == v {
		return nil
	}
	addr, ok := n.store.NodeAddr(id)
	if !ok {
		return fmt.Errorf("node: server %q has no API address registered yet", id)
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	_, err := n.applyLocal(ctx, &fsmv1.Command{Kind: &fsmv1.Command_SetNodeInfo{SetNodeInfo: &fsmv1.SetNodeInfo{
		NodeId: id, ApiAddress: addr, StateMachineVersion: v,
	}}})
	if err != nil {
		return fmt.Errorf("node: record version %d of server %q: %w", v, id, err)
	}
	n.log.Info("recorded a server's state machine version", "server", id, "version", v)
	return nil
}

// ServerVersion returns the state machine version server id last
// reported, as this node's replica records it; false when none is.
func (n *Node) ServerVersion(id string) (uint32, bool) { return n.store.NodeVersion(id) }
