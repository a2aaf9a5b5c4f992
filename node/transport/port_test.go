package transport

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/skalddb/skald/internal/testutil"
)

// newTestPort opens a cluster port on loopback with credentials derived
// from secret; the test's cleanup closes it.
func newTestPort(t testing.TB, secret string) *Port {
	t.Helper()
	creds, err := NewSecretCreds(secret, "test")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Open("127.0.0.1:0", "", creds, nil, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// testDialer dials members with credentials derived from secret.
func testDialer(t testing.TB, secret string) Dialer {
	t.Helper()
	creds, err := NewSecretCreds(secret, "test")
	if err != nil {
		t.Fatal(err)
	}
	return Dialer{creds: creds}
}

// Connections that never finish a handshake are bounded per remote
// address: past the bound the port closes new ones at once, so strangers
// cannot hold its goroutines and descriptors.
func TestClusterPortBoundsHandshakes(t *testing.T) {
	p := newTestPort(t, testClusterSecret)
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range maxHandshakesPerIP {
		c, err := net.Dial("tcp", p.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	testutil.Eventually(t, waitTimeout, "the idle connections to be handshaking", func() bool {
		_, all := p.slots.pending()
		return all == maxHandshakesPerIP
	})
	extra, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(HandshakeTimeout / 2))
	if _, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a connection past the per-address bound: read %v, want EOF (closed by the port)", err)
	}
	if got := p.refused.Load(); got != 1 {
		t.Fatalf("refused %d connections, want 1", got)
	}
	// The idle ones are closed by the handshake deadline; a member then
	// gets through.
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(2 * HandshakeTimeout))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("an idle connection past the handshake deadline: read %v, want EOF", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := testDialer(t, testClusterSecret).dial(ctx, p.Addr().String(), alpnRaft)
	if err != nil {
		t.Fatalf("a member after the strangers: %v", err)
	}
	conn.Close()
}

// Every member derives the same CA from the same secret, so certificates
// issued by different members verify against each other; another secret's
// do not.
func TestSecretCredsTrustOnlyTheSameSecret(t *testing.T) {
	a, err := NewSecretCreds("s1", "a")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		secret string
		trust  bool
	}{{"s1", true}, {"s2", false}, {"s1 ", false}}
	for _, tc := range cases {
		b, err := NewSecretCreds(tc.secret, "b")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				errs <- err
				return
			}
			s := tls.Server(c, a.serverTLS([]string{alpnRaft}))
			errs <- s.Handshake()
			s.Close()
		}()
		cli, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		cc := tls.Client(cli, b.clientTLS(alpnRaft))
		cerr := cc.Handshake()
		serr := <-errs
		cc.Close()
		ln.Close()
		if got := cerr == nil && serr == nil; got != tc.trust {
			t.Errorf("secret %q: handshake ok=%v (client %v, server %v), want %v", tc.secret, got, cerr, serr, tc.trust)
		}
	}
}
