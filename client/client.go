package client

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
)

// Client calls a Skald cluster. It is safe for concurrent use; make one
// per token and keep it.
type Client struct {
	cfg  Config
	view *view
	disc *discoverer

	// session is the highest Raft index this client wrote or saw a member
	// apply: session reads wait for it on whichever member serves them.
	session atomic.Uint64

	// retryUnknown: an append whose outcome is unknown is retried with the
	// same message ids (idempotentWrites), within dedupe's window.
	retryUnknown bool
	// dedupe caches retryWindow's answer once known.
	dedupe atomic.Pointer[time.Duration]

	stop      context.CancelFunc
	life      context.Context // ended by Close
	closeIdle func()          // of the client's own HTTP client
	closed    atomic.Bool
	wg        sync.WaitGroup

	// The AppendStreams to each member (appendstream.go); poolsClosed
	// once Close began, after which none is opened.
	poolsMu     sync.Mutex
	pools       map[*member]*appendPool
	poolsClosed bool
	streamsWG   sync.WaitGroup // their readers
}

// New returns a client of the cluster at cfg.Endpoints. With the admin
// token it asks the members for Cluster.Status within ctx to learn the
// others and the leader; an unreachable cluster is not an error here (the
// calls fail over and report ErrUnavailable), a refused token is
// (ErrUnauthenticated).
func New(ctx context.Context, cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	own := hc == nil
	if own {
		hc = newHTTPClient(cfg)
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	var seeds []string
	for _, e := range cfg.Endpoints {
		e = strings.TrimSuffix(e, "/")
		if !strings.Contains(e, "://") {
			e = scheme + "://" + e
		}
		seeds = append(seeds, e)
	}
	hints := &leaderHints{}
	interceptors := []connect.Interceptor{bearer{token: cfg.Token, namespace: cfg.Namespace}}
	if !cfg.Pinned {
		interceptors = append(interceptors, hints)
	}
	interceptors = append(interceptors, traceparent{}) // the caller's trace context
	opts := []connect.ClientOption{connect.WithInterceptors(interceptors...)}
	newMember := func(url string) *member {
		return &member{
			url:        url,
			events:     skaldv1connect.NewEventStoreClient(hc, url, opts...),
			namespaces: skaldv1connect.NewNamespacesClient(hc, url, opts...),
			cluster:    skaldv1connect.NewClusterClient(hc, url, opts...),
			subs:       skaldv1connect.NewSubscriptionsClient(hc, url, opts...),
			creds:      skaldv1connect.NewCredentialsClient(hc, url, opts...),
			indexes:    skaldv1connect.NewIndexesClient(hc, url, opts...),
		}
	}
	c := &Client{cfg: cfg, view: newView(seeds, newMember, cfg.DownFor), retryUnknown: idempotentWrites}
	hints.view = c.view
	if own {
		c.closeIdle = hc.CloseIdleConnections
	}
	c.disc = &discoverer{view: c.view, scheme: schemeOf(seeds[0]), timeout: cfg.DialTimeout + time.Second, kick: make(chan struct{}, 1)}
	c.disc.disabled = cfg.Pinned
	if err := c.disc.refresh(ctx); err != nil {
		return nil, err
	}
	life, stop := context.WithCancel(context.Background())
	c.stop, c.life = stop, life
	c.wg.Go(func() { c.disc.loop(life, cfg.DiscoveryInterval) })
	return c, nil
}

// Close stops the client's background work. Calls in flight end with
// their contexts; later calls fail with ErrClosed.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.stop()
	c.closePools()
	c.wg.Wait()
	if c.closeIdle != nil {
		c.closeIdle()
	}
	return nil
}

// SessionIndex is the Raft index session reads wait for: the highest this
// client wrote or saw applied.
func (c *Client) SessionIndex() uint64 { return c.session.Load() }

// observe raises the session index to index.
func (c *Client) observe(index uint64) {
	for {
		cur := c.session.Load()
		if index <= cur || c.session.CompareAndSwap(cur, index) {
			return
		}
	}
}

// newHTTPClient speaks HTTP/2 to every member: h2c on plaintext, ALPN
// with TLS. Pings find a dead connection under a quiet subscription.
func newHTTPClient(cfg Config) *http.Client {
	d := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 15 * time.Second}
	tr := &http.Transport{
		DialContext:         d.DialContext,
		TLSClientConfig:     cfg.TLS,
		TLSHandshakeTimeout: cfg.DialTimeout,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
		HTTP2:               &http.HTTP2Config{SendPingTimeout: 10 * time.Second, PingTimeout: 5 * time.Second},
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP2(true)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// bearer sets the Authorization header of every call, and the namespace
// it acts on (NamespaceHeader) when one is configured.
type bearer struct{ token, namespace string }

// NamespaceHeader names the namespace an admin token's call acts on
// (rpc.NamespaceHeader).
const NamespaceHeader = "Skald-Namespace"

func (b bearer) set(h http.Header) {
	if b.token != "" {
		h.Set("Authorization", "Bearer "+b.token)
	}
	if b.namespace != "" {
		h.Set(NamespaceHeader, b.namespace)
	}
}

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		b.set(req.Header())
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		b.set(conn.RequestHeader())
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// served tells Config.Observe that m answered a call.
func (c *Client) served(m *member) {
	if c.cfg.Observe != nil {
		c.cfg.Observe(m.url)
	}
}
