package transport

import (
	"sync"
	"time"
)

// Bounds on connections to the cluster port that have not proven
// membership yet, so that strangers cannot hold unbounded goroutines and
// file descriptors, nor crowd members out.
const (
	// HandshakeTimeout: a connection must complete its TLS handshake in
	// this time or be closed.
	HandshakeTimeout = 5 * time.Second
	// PressedHandshakeTimeout replaces HandshakeTimeout for a stranger's
	// connection admitted while the shared pool is half full or more: a
	// TLS handshake between hosts takes milliseconds, and a crowd holding
	// the pool then frees its slots five times as often.
	PressedHandshakeTimeout = time.Second
	// MaxHandshakes: the shared pool, the handshakes of remote addresses
	// that no member is known at. A connection arriving while it is full
	// is closed at once.
	MaxHandshakes = 256
	// maxHandshakesPerIP: the same, per remote IP address; and what each
	// member known at an address reserves there. A member needs a handful
	// at most (Raft's pool of 3, one for the peer service).
	maxHandshakesPerIP = 16
)

// handshakeSlots counts the cluster port's connections that are
// handshaking, and decides whether another may.
//
// INVARIANT: the connections of addresses where no member is known hold
// at most MaxHandshakes slots, and at most maxHandshakesPerIP per address;
// an address where k members are known holds at most k*maxHandshakesPerIP,
// none of them from the shared pool. So strangers can fill only the shared
// pool, and a member's connection from the address the configuration
// names for it is refused only when that address itself is crowding the
// port (members behind one address, as on a loopback test cluster, share
// its k*maxHandshakesPerIP).
type handshakeSlots struct {
	mu      sync.Mutex
	shared  int            // slots of the shared pool taken
	perIP   map[string]int // slots taken, by remote IP
	members map[string]int // remote IP -> members known there
	// The deadlines of a handshake: a member's or in a quiet pool, and a
	// stranger's in a pool half full.
	timeout, pressedTimeout time.Duration
}

func newHandshakeSlots() *handshakeSlots {
	return &handshakeSlots{perIP: make(map[string]int), members: make(map[string]int),
		timeout: HandshakeTimeout, pressedTimeout: PressedHandshakeTimeout}
}

// slot is one admitted handshake: release gives it back.
type slot struct {
	ip       string
	reserved bool          // a member address's, not the shared pool's
	timeout  time.Duration // the handshake's deadline
}

// admit takes a slot for a connection from ip, or reports false when the
// connection must be closed at once.
func (s *handshakeSlots) admit(ip string) (slot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.members[ip]; k > 0 {
		if s.perIP[ip] >= k*maxHandshakesPerIP {
			return slot{}, false
		}
		s.perIP[ip]++
		return slot{ip: ip, reserved: true, timeout: s.timeout}, true
	}
	if s.shared >= MaxHandshakes || s.perIP[ip] >= maxHandshakesPerIP {
		return slot{}, false
	}
	timeout := s.timeout
	if s.shared >= MaxHandshakes/2 {
		timeout = s.pressedTimeout
	}
	s.shared++
	s.perIP[ip]++
	return slot{ip: ip, timeout: timeout}, true
}

// release gives back a slot admit took.
func (s *handshakeSlots) release(sl slot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sl.reserved {
		s.shared--
	}
	if s.perIP[sl.ip]--; s.perIP[sl.ip] == 0 {
		delete(s.perIP, sl.ip)
	}
}

// setMembers replaces the members known by remote IP (IP -> how many);
// slots already taken stay with their connections.
func (s *handshakeSlots) setMembers(members map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members = members
}

// pending returns the slots taken: in the shared pool, and in all.
func (s *handshakeSlots) pending() (shared, all int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.perIP {
		all += n
	}
	return s.shared, all
}

// SetPressedTimeout sets the deadline of a stranger's handshake admitted
// while the shared pool is half full or more (PressedHandshakeTimeout
// unless set; HandshakeTimeout turns the shortening off). Handshakes
// already admitted keep theirs.
func (p *Port) SetPressedTimeout(d time.Duration) {
	p.slots.mu.Lock()
	defer p.slots.mu.Unlock()
	p.slots.pressedTimeout = d
}
