package transport

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/skalddb/skald/internal/testutil"
)

// The shared pool and the per-address bound hold strangers; a member's
// address has its own slots, which a crowd of strangers cannot take.
func TestHandshakeSlotsReserveMembers(t *testing.T) {
	// crowd is perIP slots from each of ips stranger addresses.
	type crowd struct{ ips, perIP int }
	cases := []struct {
		name        string
		members     map[string]int
		crowd       crowd
		member      int    // then this many from 10.1.0.1
		ip          string // then one more from ip
		want        bool
		wantTimeout time.Duration
	}{
		{"a stranger in a quiet port", nil, crowd{0, 0}, 0, "10.0.0.1", true, HandshakeTimeout},
		{"a stranger past its address's bound", nil, crowd{1, maxHandshakesPerIP}, 0, "10.0.0.1", false, 0},
		{"another stranger beside one at its bound", nil, crowd{1, maxHandshakesPerIP}, 0, "10.0.0.2",
			true, HandshakeTimeout},
		{"a stranger with the pool half full", nil, crowd{MaxHandshakes / 2 / 8, 8}, 0, "10.2.0.1",
			true, PressedHandshakeTimeout},
		{"a stranger with the pool full", nil, crowd{MaxHandshakes / 8, 8}, 0, "10.2.0.1", false, 0},
		{"a member with the pool full", map[string]int{"10.1.0.1": 1}, crowd{MaxHandshakes / 8, 8}, 0, "10.1.0.1",
			true, HandshakeTimeout},
		{
			"a member past its own bound",
			map[string]int{"10.1.0.1": 1},
			crowd{0, 0},
			maxHandshakesPerIP,
			"10.1.0.1",
			false,
			0,
		},
		{"three members behind one address", map[string]int{"10.1.0.1": 3}, crowd{MaxHandshakes / 8, 8},
			2 * maxHandshakesPerIP, "10.1.0.1", true, HandshakeTimeout},
		{"three members behind one address, past their bound", map[string]int{"10.1.0.1": 3}, crowd{0, 0},
			3 * maxHandshakesPerIP, "10.1.0.1", false, 0},
		{"a stranger beside members at their bound", map[string]int{"10.1.0.1": 1}, crowd{0, 0},
			maxHandshakesPerIP, "10.0.0.1", true, HandshakeTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newHandshakeSlots()
			s.setMembers(tc.members)
			for i := range tc.crowd.ips {
				for range tc.crowd.perIP {
					if _, ok := s.admit(fmt.Sprintf("10.0.%d.%d", i/200, 1+i%200)); !ok {
						t.Fatalf("the crowd's address %d refused", i)
					}
				}
			}
			for i := range tc.member {
				if _, ok := s.admit("10.1.0.1"); !ok {
					t.Fatalf("member connection %d refused", i)
				}
			}
			sl, ok := s.admit(tc.ip)
			if ok != tc.want || sl.timeout != tc.wantTimeout {
				t.Fatalf(
					"admit(%s) = %v with deadline %v, want %v with %v",
					tc.ip,
					ok,
					sl.timeout,
					tc.want,
					tc.wantTimeout,
				)
			}
			shared, _ := s.pending()
			if max := MaxHandshakes; shared > max {
				t.Fatalf("shared pool holds %d, over its %d", shared, max)
			}
		})
	}
}

// Releasing gives every slot back to where it was taken from, even when
// the address became a member's in between.
func TestHandshakeSlotsRelease(t *testing.T) {
	s := newHandshakeSlots()
	var taken []slot
	for _, ip := range []string{"10.0.0.1", "10.0.0.1", "10.1.0.1"} {
		sl, ok := s.admit(ip)
		if !ok {
			t.Fatalf("admit(%s) refused", ip)
		}
		taken = append(taken, sl)
	}
	s.setMembers(map[string]int{"10.0.0.1": 1})
	if shared, all := s.pending(); shared != 3 || all != 3 {
		t.Fatalf("pending %d shared, %d in all; want 3, 3", shared, all)
	}
	mine, ok := s.admit("10.0.0.1")
	if !ok || !mine.reserved {
		t.Fatalf("a member's admit: %+v, %v; want a reserved slot", mine, ok)
	}
	for _, sl := range append(taken, mine) {
		s.release(sl)
	}
	if shared, all := s.pending(); shared != 0 || all != 0 || len(s.perIP) != 0 {
		t.Fatalf("after release: %d shared, %d in all, %d addresses; want none", shared, all, len(s.perIP))
	}
}

// On a real port: a crowd from 20 loopback addresses at the per-address
// bound holds the shared pool, and a member at the address its
// reservation names still completes a handshake, while a stranger from
// another address is closed at once.
func TestClusterPortReservesMembersHandshakes(t *testing.T) {
	p := newTestPort(t, testClusterSecret)
	p.reserveFor(map[string]int{"127.0.0.1": 1})
	p.slots.mu.Lock()
	p.slots.timeout, p.slots.pressedTimeout = time.Minute, time.Minute // the crowd stays until the test ends
	p.slots.mu.Unlock()
	var idle []net.Conn
	t.Cleanup(func() {
		for _, c := range idle {
			c.Close()
		}
	})
	dialFrom := func(ip byte) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, ip)}, Timeout: waitTimeout}
		return d.Dial("tcp", p.Addr().String())
	}
	for ip := byte(2); ip < 22; ip++ {
		for range maxHandshakesPerIP {
			c, err := dialFrom(ip)
			if err != nil {
				t.Fatal(err)
			}
			idle = append(idle, c)
		}
	}
	testutil.Eventually(t, waitTimeout, "the crowd to fill the shared pool", func() bool {
		shared, _ := p.slots.pending()
		return shared == MaxHandshakes
	})
	stranger, err := dialFrom(22)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	stranger.SetReadDeadline(time.Now().Add(waitTimeout)) // before the deadlines of a minute
	if _, err := stranger.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a stranger past the shared pool: read %v, want EOF (closed by the port)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := testDialer(t, testClusterSecret).dial(ctx, p.Addr().String(), alpnRaft)
	if err != nil {
		t.Fatalf("a member through the crowd: %v", err)
	}
	conn.Close()
	if shared, _ := p.slots.pending(); shared != MaxHandshakes {
		t.Fatalf(
			"the shared pool holds %d, want %d: the crowd was gone before the member dialed",
			shared,
			MaxHandshakes,
		)
	}
}
