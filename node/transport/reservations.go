package transport

import (
	"context"
	"maps"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Members is what the port needs from its node to reserve handshake slots
// for the cluster's members.
type Members interface {
	// KnownServers returns the cluster-port addresses this node knows for
	// each server (several when they differ between sources).
	KnownServers() map[raft.ServerID][]string
}

// reserveInterval is how often the port's reservations are brought up to
// date with the servers its node knows.
const reserveInterval = time.Second

// KeepReservations keeps the port's reserved handshake slots (see
// handshakeSlots) on the IP addresses of the servers members knows, every
// second, until ctx ends.
func (p *Port) KeepReservations(ctx context.Context, members Members) {
	r := &memberResolver{names: make(map[string][]string)}
	round := func() {
		ctx, cancel := context.WithTimeout(ctx, reserveInterval)
		defer cancel()
		p.reserveFor(r.memberIPs(ctx, members.KnownServers()))
	}
	round()
	tick := time.NewTicker(reserveInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		round()
	}
}

// reserveFor sets the members known by remote IP address (IP -> how
// many), whose handshakes do not draw on the pool strangers share (see
// handshakeSlots).
func (p *Port) reserveFor(members map[string]int) { p.slots.setMembers(members) }

// Reservations returns the members known by remote IP address (IP -> how
// many) that the port reserves handshake slots for.
func (p *Port) Reservations() map[string]int {
	p.slots.mu.Lock()
	defer p.slots.mu.Unlock()
	return maps.Clone(p.slots.members)
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
