package node

import (
	"context"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// memberAddrInterval is how often the cluster port's reservations are
// brought up to date with the servers this node knows.
const memberAddrInterval = time.Second

// memberAddrLoop keeps the cluster port's reserved handshake slots (see
// handshakeSlots) on the IP addresses of the servers this node knows: those
// of the latest Raft configuration, which a restarted node has from its log
// before it hears from anyone, and those membership reported (a joining
// server is known there before the configuration names it). It is a loop of
// the node's: it calls n.wg.Done when it returns.
func (n *Node) memberAddrLoop() {
	r := &memberResolver{names: make(map[string][]string)}
	round := func() {
		ctx, cancel := context.WithTimeout(n.life, memberAddrInterval)
		defer cancel()
		n.port.reserveFor(r.memberIPs(ctx, n.knownServers()))
	}
	round()
	n.every(memberAddrInterval, nil, round)
}

// knownServers returns the Raft addresses this node knows for each
// server: the configuration's, and membership's where it differs.
func (n *Node) knownServers() map[raft.ServerID][]string {
	out := make(map[raft.ServerID][]string)
	if servers, err := n.Servers(); err == nil {
		for _, s := range servers {
			out[s.ID] = append(out[s.ID], string(s.Address))
		}
	}
	for id, addr := range n.addrs.all() {
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

// memberResolver turns servers' Raft addresses into the IP addresses
// their connections come from. It remembers the last answer for each host
// name, so that a failed lookup keeps a member's reservation.
type memberResolver struct {
	names map[string][]string // host name -> its IPs, as last resolved
}

// memberIPs returns, for each IP address of servers, how many of the
// servers are known there. A server counts once at each of its IPs
// however many of its addresses name it.
func (r *memberResolver) memberIPs(ctx context.Context, servers map[raft.ServerID][]string) map[string]int {
	out := make(map[string]int)
	for _, addrs := range servers {
		seen := make(map[string]bool)
		for _, addr := range addrs {
			for _, ip := range r.ips(ctx, addr) {
				if !seen[ip] {
					seen[ip] = true
					out[ip]++
				}
			}
		}
	}
	return out
}

// ips returns the IP addresses of a host:port address in net.IP's text
// form, as remoteIP writes them; none when it has no host or its name
// never resolved.
func (r *memberResolver) ips(ctx context.Context, addr string) []string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return []string{ip.String()}
	}
	found, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(found) == 0 {
		return r.names[host]
	}
	ips := make([]string, len(found))
	for i, a := range found {
		ips[i] = a.IP.String()
	}
	r.names[host] = ips
	return ips
}
