package client_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestTLS: with Config.TLS, host:port endpoints and the members
// discovered from Cluster.Status are called over HTTPS (HTTP/2 by ALPN);
// writes, reads on every member and a subscription work.
func TestTLS(t *testing.T) {
	cl := testcluster.StartTLS(t, 3)
	pem, err := os.ReadFile(cl.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in the CA file")
	}
	ctx := ctxT(t)
	c, o := observedClient(t, client.Config{Endpoints: []string{cl.Nodes[1].Addr}, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if got, want := writeTarget(t, c, o), "https://"+cl.Leader().Addr; got != want {
		t.Fatalf("writes go to %q, want the leader %q", got, want)
	}
	res, err := c.Append(ctx, "orders-1", []client.NewMessage{event(0)})
	if err != nil {
		t.Fatal(err)
	}
	o.take()
	for range 3 {
		if m, found, err := c.LastMessage(ctx, "orders-1", ""); err != nil || !found || m.ID != res.IDs[0] {
			t.Fatalf("read: %v, found %v, id %s, want %s", err, found, m.ID, res.IDs[0])
		}
	}
	for m, err := range c.Subscribe(ctx, client.Subscription{Stream: "orders-1"}) {
		if err != nil || m.ID != res.IDs[0] {
			t.Fatalf("subscription: %v, id %s, want %s", err, m.ID, res.IDs[0])
		}
		break
	}
	served := o.count() // reads and the subscription's delivery
	for _, n := range cl.Nodes {
		if served["https://"+n.Addr] == 0 {
			t.Errorf("no read served by %s over HTTPS (served: %v)", n.Addr, served)
		}
	}
}
