package rpc

import (
	"context"
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node"
)

// The harness runs real nodes (node.TestCluster: Raft over loopback TCP,
// Pebble on disk), each serving NewHandler over HTTP/1 and h2c, and calls
// them with generated connect-go clients over every protocol.

const adminToken = "ns_ZGVmYXVsdA_0000000000000000000000000000000000000000000000000000000000000000"

const waitTimeout = 20 * time.Second

type server struct {
	n    *node.Node
	addr string               // host:port of the API
	reg  *prometheus.Registry // the node's metrics
}

var defaultOptions = Options{Subscribe: subscribeConfig{Heartbeat: 200 * time.Millisecond}}

// startCluster starts size nodes serving NewHandler(opts) and returns
// them with the leader; every node has applied the leader's last entry.
func startCluster(t testing.TB, size int, opts Options) ([]*server, *server) {
	t.Helper()
	c := node.StartTestCluster(t, size, node.TestClusterOptions{
		Config: func(_ int, cfg *node.Config) { cfg.ReadWait = 2 * time.Second },
		Handler: func(tn *node.TestNode) http.Handler {
			o := opts
			o.Registerer, o.Gatherer = tn.Registry, tn.Registry
			return NewHandler(tn.Node, o)
		},
	})
	var servers []*server
	var leader *server
	l := c.Leader()
	for _, tn := range c.Nodes {
		s := &server{n: tn.Node, addr: tn.Addr, reg: tn.Registry}
		servers = append(servers, s)
		if tn == l {
			leader = s
		}
	}
	return servers, leader
}

// startServer starts one bootstrapped node, without the admin namespace.
func startServer(t testing.TB) *server {
	t.Helper()
	_, s := startCluster(t, 1, defaultOptions)
	return s
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
	return singleWith(t, defaultOptions)
}

func singleWith(t testing.TB, opts Options) *server {
	t.Helper()
	_, s := startCluster(t, 1, opts)
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
	t.Helper()
	servers, l := startCluster(t, 3, defaultOptions)
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
	indexes    skaldv1connect.IndexesClient
}

func newClients(s *server, p protocol, token string) clients {
	opts := append([]connect.ClientOption{connect.WithInterceptors(bearerInterceptor(token))}, p.opts...)
	hc, url := p.http(), "http://"+s.addr
	return clients{
		events:     skaldv1connect.NewEventStoreClient(hc, url, opts...),
		namespaces: skaldv1connect.NewNamespacesClient(hc, url, opts...),
		cluster:    skaldv1connect.NewClusterClient(hc, url, opts...),
		subs:       skaldv1connect.NewSubscriptionsClient(hc, url, opts...),
		indexes:    skaldv1connect.NewIndexesClient(hc, url, opts...),
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
