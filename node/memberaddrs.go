package node

import "github.com/hashicorp/raft"

// memberAddrLoop keeps the cluster port's reserved handshake slots on the
// IP addresses of the servers this node knows (see knownServers). It is a
// loop of the node's: it calls n.wg.Done when it returns.
func (n *Node) memberAddrLoop() {
	defer n.wg.Done()
	n.port.KeepReservations(n.life, knownServers{n})
}

// knownServers are the servers a node knows, for the cluster port's
// reservations (transport.Members): those of the latest Raft
// configuration, which a restarted node has from its log before it hears
// from anyone, and those membership reported (a joining server is known
// there before the configuration names it).
type knownServers struct{ n *Node }

// KnownServers returns the Raft addresses this node knows for each
// server: the configuration's, and membership's where it differs.
func (k knownServers) KnownServers() map[raft.ServerID][]string {
	out := make(map[raft.ServerID][]string)
	if servers, err := k.n.Servers(); err == nil {
		for _, s := range servers {
			out[s.ID] = append(out[s.ID], string(s.Address))
		}
	}
	for id, addr := range k.n.addrs.all() {
		out[id] = append(out[id], string(addr))
	}
	return out
}

// all returns a copy of the addresses recorded.
func (b *addressBook) all() map[raft.ServerID]raft.ServerAddress {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make(map[raft.ServerID]raft.ServerAddress, len(b.addrs))
	for id, a := range b.addrs {
		out[id] = a
	}
	return out
}
