package rpc

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node"
	"github.com/skalddb/skald/rpc/gen/skald/v1/skaldv1connect"
)

// The harness runs real nodes (Raft over loopback TCP, Pebble on disk),
// each behind a real HTTP listener serving NewHandler with h2c, and calls
// them with generated connect-go clients over every protocol.

const adminToken = "ns_ZGVmYXVsdA_0000000000000000000000000000000000000000000000000000000000000000"

const waitTimeout = 20 * time.Second

type server struct {
	n    *node.Node
	addr string // host:port of the API
}

func startServer(t testing.TB, bootstrap bool) *server {
	t.Helper()
	return startServerWith(t, bootstrap, Options{Subscribe: subscribeConfig{Heartbeat: 200 * time.Millisecond}})
}

func startServerWith(t testing.TB, bootstrap bool, opts Options) *server {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Registerer, opts.Gatherer = reg, reg
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Config{
		DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", APIAddr: ln.Addr().String(), ClusterSecret: "rpc-test-secret",
		Bootstrap: bootstrap, Timing: node.FastTiming, LeaderWait: 10 * time.Second, ReadWait: 2 * time.Second,
		Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: NewHandler(n, opts), Protocols: p, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		n.Close()
	})
	return &server{n: n, addr: ln.Addr().String()}
}

// createAdmin creates the default namespace with adminToken.
func createAdmin(t testing.TB, n *node.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := n.CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: nstoken.AdminNamespace, TokenHash: nstoken.Hash(adminToken)}); err != nil {
		t.Fatal(err)
	}
}

// single starts one bootstrapped node with the admin namespace.
func single(t testing.TB) *server {
	return singleWith(t, Options{Subscribe: subscribeConfig{Heartbeat: 200 * time.Millisecond}})
}

func singleWith(t testing.TB, opts Options) *server {
	s := startServerWith(t, true, opts)
	testutil.Eventually(t, waitTimeout, "leadership", s.n.IsLeader)
	createAdmin(t, s.n)
	return s
}

// followerOfThree starts a 3-node cluster and returns a follower.
func followerOfThree(t testing.TB) *server {
	servers, l := clusterOfThree(t)
	for _, f := range servers {
		if f != l {
			return f
		}
	}
	return nil
}

// clusterOfThree starts a 3-node cluster with the admin namespace and
// returns its servers and the leader; every follower knows the leader.
func clusterOfThree(t testing.TB) ([]*server, *server) {
	servers := []*server{startServer(t, true), startServer(t, false), startServer(t, false)}
	testutil.Eventually(t, waitTimeout, "leadership", servers[0].n.IsLeader)
	leader := func() *server {
		for _, s := range servers {
			if s.n.IsLeader() {
				return s
			}
		}
		return nil
	}
	for _, s := range servers[1:] {
		// Whoever leads adds it: under load a young leader can step down.
		testutil.Eventually(t, waitTimeout, "adding a voter", func() bool {
			l := leader()
			if l == nil {
				return false
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return l.n.AddVoter(ctx, s.n.ID(), s.n.RaftAddr()) == nil
		})
	}
	var l *server
	testutil.Eventually(t, waitTimeout, "a leader", func() bool { l = leader(); return l != nil })
	createAdmin(t, l.n)
	for _, f := range servers {
		if f != l {
			testutil.Eventually(t, waitTimeout, "the follower to know the leader", func() bool { id, _ := f.n.Leader(); return id == l.n.ID() })
		}
	}
	return servers, l
}

// protocol is one way of calling the API.
type protocol struct {
	name string
	opts []connect.ClientOption
	http func() *http.Client
}

func http1() *http.Client { return &http.Client{} }

func h2c() *http.Client {
	tr := &http.Transport{}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	tr.TLSClientConfig = &tls.Config{}
	return &http.Client{Transport: tr}
}

var protocols = []protocol{
	{"connect-json", []connect.ClientOption{connect.WithProtoJSON()}, http1},
	{"connect-proto", nil, http1},
	{"grpc", []connect.ClientOption{connect.WithGRPC()}, h2c},
	{"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}, http1},
}

// clients are the generated clients of one protocol, with a token.
type clients struct {
	events     skaldv1connect.EventStoreClient
	namespaces skaldv1connect.NamespacesClient
	cluster    skaldv1connect.ClusterClient
	subs       skaldv1connect.SubscriptionsClient
}

func newClients(s *server, p protocol, token string) clients {
	opts := append([]connect.ClientOption{connect.WithInterceptors(bearerInterceptor(token))}, p.opts...)
	hc, url := p.http(), "http://"+s.addr
	return clients{
		events:     skaldv1connect.NewEventStoreClient(hc, url, opts...),
		namespaces: skaldv1connect.NewNamespacesClient(hc, url, opts...),
		cluster:    skaldv1connect.NewClusterClient(hc, url, opts...),
		subs:       skaldv1connect.NewSubscriptionsClient(hc, url, opts...),
	}
}

// bearerInterceptor sets the Authorization header ("" sends none).
func bearerInterceptor(token string) connect.Interceptor {
	return &bearerAuth{token}
}

type bearerAuth struct{ token string }

func (b *bearerAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if b.token != "" {
			req.Header().Set("Authorization", "Bearer "+b.token)
		}
		return next(ctx, req)
	}
}

func (b *bearerAuth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if b.token != "" {
			conn.RequestHeader().Set("Authorization", "Bearer "+b.token)
		}
		return conn
	}
}

func (b *bearerAuth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}
