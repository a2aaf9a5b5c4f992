package kurrentdb

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node"
	"github.com/skalddb/skald/rpc"
)

// The harness runs real nodes (node.TestCluster: Raft over loopback,
// Pebble on disk), each serving this package on a listener of its own,
// and calls them with KurrentDB's official Go client.

const waitTimeout = 20 * time.Second

// testNamespace is the namespace every test acts on.
const testNamespace = "shop"

// member is one node with its KurrentDB listener.
type member struct {
	tn   *node.TestNode
	addr string // host:port of the KurrentDB listener
}

// fixture is a running cluster with the namespace's credentials.
type fixture struct {
	members []*member
	leader  *member
	owner   string // the namespace's initial token (credential "initial", owner)
	reader  string // a reader credential's token, named readerName
	orders  string // a writer credential scoped to category "order", named ordersName
}

const (
	readerName = "auditor"
	ordersName = "orders"
)

// listenerMode is how the fixture's listeners authenticate.
type listenerMode int

const (
	insecureMode listenerMode = iota // bound to testNamespace, h2c
	secureMode                       // credentials over TLS
)

// start starts size nodes, each serving the protocol in mode, creates
// testNamespace with an owner and a reader credential, and returns once
// every follower knows the leader.
func start(t *testing.T, size int, mode listenerMode) *fixture {
	t.Helper()
	c := node.StartTestCluster(t, size, node.TestClusterOptions{
		Config: func(_ int, cfg *node.Config) { cfg.ReadWait = 2 * time.Second },
	})
	f := &fixture{}
	var cfg *tls.Config
	if mode == secureMode {
		cfg = selfSigned(t)
	}
	// Every listener first, so Endpoint's map is complete (and no longer
	// written) before any server answers.
	endpoints := map[string]string{}
	var lns []net.Listener
	for _, tn := range c.Nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		m := &member{tn: tn, addr: ln.Addr().String()}
		endpoints[tn.ID()] = m.addr
		f.members = append(f.members, m)
		if tn == c.Leader() {
			f.leader = m
		}
	}
	for i, m := range f.members {
		opts := Options{Advertise: m.addr, Endpoint: func(id, _ string) (string, bool) {
			a, ok := endpoints[id]
			return a, ok
		}}
		if mode == insecureMode {
			opts.Namespace = testNamespace
		}
		serve(t, m.tn, lns[i], cfg, opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var err error
	if f.owner, err = nstoken.New(testNamespace); err != nil {
		t.Fatal(err)
	}
	n := f.leader.tn.Node
	create := &fsmv1.CreateNamespace{Name: testNamespace, TokenHash: nstoken.Hash(f.owner)}
	if _, err := n.CreateNamespace(ctx, create); err != nil {
		t.Fatal(err)
	}
	credential := func(name string, role fsm.Role, scope ...string) string {
		token, id, err := nstoken.NewCredential(testNamespace)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.CreateCredential(ctx, &fsmv1.CreateCredential{Namespace: testNamespace, Id: id, Name: name,
			Role: uint32(role), Scope: scope, TokenHash: nstoken.Hash(token)}); err != nil {
			t.Fatal(err)
		}
		return token
	}
	f.reader = credential(readerName, fsm.RoleReader)
	f.orders = credential(ordersName, fsm.RoleWriter, "order")
	for _, m := range f.members {
		testutil.Eventually(t, waitTimeout, "every member to know the leader", func() bool {
			id, _ := m.tn.Leader()
			return id == f.leader.tn.ID()
		})
	}
	return f
}

// serve serves the protocol of tn on ln with opts (TLS with cfg, else
// h2c) until the test ends, and fails the test if serving fails.
func serve(t *testing.T, tn *node.TestNode, ln net.Listener, cfg *tls.Config, opts Options) {
	t.Helper()
	opts.Logger = testutil.Logger(t)
	srv, err := New(rpc.NewLocal(tn.Node, rpc.Options{Logger: opts.Logger}), tn.Node, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}

// client connects the official client to m with connection string
// query (e.g. "tls=false"), with user:password when user is set.
func client(t *testing.T, m *member, user, password, query string) *kurrentdb.Client {
	t.Helper()
	auth := ""
	if user != "" {
		auth = user + ":" + password + "@"
	}
	cfg, err := kurrentdb.ParseConnectionString("kurrentdb://" + auth + m.addr + "?" + query)
	if err != nil {
		t.Fatal(err)
	}
	return dial(t, cfg)
}

// dial makes the client of cfg, its log in the test's.
func dial(t *testing.T, cfg *kurrentdb.Configuration) *kurrentdb.Client {
	t.Helper()
	cfg.Logger = func(level kurrentdb.LogLevel, format string, args ...any) {
		t.Logf("client %s: "+format, append([]any{level}, args...)...)
	}
	cl, err := kurrentdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// insecureClient is a client over h2c without credentials.
func insecureClient(t *testing.T, m *member) *kurrentdb.Client {
	return client(t, m, "", "", "tls=false")
}

// tlsClient is a client over TLS (the test's certificate not verified)
// with user:password.
func tlsClient(t *testing.T, m *member, user, password string) *kurrentdb.Client {
	return client(t, m, user, password, "tls=true&tlsverifycert=false")
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// selfSigned is a TLS configuration with a certificate for 127.0.0.1.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "skald-kurrentdb-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
