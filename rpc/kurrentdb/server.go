package kurrentdb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/persistent"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/rpc"
)

// Cluster is what Gossip needs from the node: who leads and who the
// members are.
type Cluster interface {
	Status() nodeapi.Status
	Members() ([]nodeapi.Member, error)
	NodeAddrs() map[string]string
}

// Options configures a Server.
type Options struct {
	Logger *slog.Logger
	// Namespace, when set, binds the listener to that namespace without
	// authentication: every call acts on it with the owner role, whatever
	// credentials it carries (KurrentDB's insecure mode; the official
	// clients send no credentials over plain text). Empty: every call but
	// ServerFeatures and Gossip needs a Skald credential.
	Namespace string
	// Endpoint is the KurrentDB address (host:port) of the member of id
	// whose API address is api, for Gossip; ok false leaves the member
	// out. Default: SameOffset(Advertise, API).
	Endpoint func(id, api string) (addr string, ok bool)
	// Advertise is this node's KurrentDB address as clients reach it, and
	// API its API address as the cluster knows it.
	Advertise, API string
	// MaxMessageBytes bounds one request message (default 17 MiB, as the
	// clients' own limit on what they receive).
	MaxMessageBytes int
	// Registerer receives the protocol's metrics (metrics.go); default: a
	// registry of its own.
	Registerer prometheus.Registerer

	// Limits bounds each call's time and idle connections as on the API
	// port (bounds.go); zero fields are rpc's defaults.
	Limits rpc.Limits
	// Connections, when set, caps Serve's connections, under caps the API
	// port's listener shares (--max-connections, --max-connections-per-ip);
	// nil: no cap.
	Connections *rpc.ConnCaps
	// TracerProvider, when set, traces every call as the API's are
	// (trace.go); nil: nothing traced, nothing installed.
	TracerProvider trace.TracerProvider
}

// Server serves KurrentDB's protocol over rpc.Local for one node.
type Server struct {
	local   *rpc.Local
	cluster Cluster
	log     *slog.Logger
	opts    Options
	metrics *metrics
	handler http.Handler
	served  map[string]struct{} // the paths of the served methods
}

// defaultMaxMessageBytes is a message the clients could receive.
const defaultMaxMessageBytes = 17 << 20

// New returns the server of local and cluster; it fails only when its
// metrics cannot be registered.
func New(local *rpc.Local, cluster Cluster, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Endpoint == nil {
		opts.Endpoint = SameOffset(opts.Advertise, opts.API)
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = defaultMaxMessageBytes
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	opts.Limits = opts.Limits.WithDefaults()
	s := &Server{local: local, cluster: cluster, log: opts.Logger, opts: opts, metrics: m, served: map[string]struct{}{}}
	s.handler = deadlines{limits: opts.Limits, next: s.routes()}
	if opts.TracerProvider != nil {
		s.handler = rpc.Traced(opts.TracerProvider, s.spanName, s.handler)
	}
	return s, nil
}

// SameOffset is the Endpoint of a cluster whose nodes all serve
// KurrentDB at the same offset from their API port as this one
// (advertise against api, this node's API address): on the same port
// when every node uses the same ports, on 2113+10i beside 8080+10i in
// skald dev. A member's host is its API address's.
func SameOffset(advertise, api string) func(id, api string) (string, bool) {
	offset, err := portOffset(advertise, api)
	return func(_, member string) (string, bool) {
		host, portText, herr := net.SplitHostPort(member)
		if err != nil || herr != nil {
			return "", false
		}
		port, perr := strconv.Atoi(portText)
		if perr != nil || port+offset < 1 || port+offset > 65535 {
			return "", false
		}
		return net.JoinHostPort(host, strconv.Itoa(port+offset)), true
	}
}

// portOffset is the port of a minus the port of b.
func portOffset(a, b string) (int, error) {
	var ports [2]int
	for i, addr := range []string{a, b} {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			return 0, err
		}
		if ports[i], err = strconv.Atoi(p); err != nil {
			return 0, fmt.Errorf("port of %q: %w", addr, err)
		}
	}
	return ports[0] - ports[1], nil
}

// Insecure reports whether the server authenticates nobody.
func (s *Server) Insecure() bool { return s.opts.Namespace != "" }

// Handler is the HTTP handler of the protocol (gRPC over HTTP/2).
func (s *Server) Handler() http.Handler { return s.handler }

// handlerOpts are the options of every method's handler.
func (s *Server) handlerOpts() []connect.HandlerOption {
	interceptors := []connect.Interceptor{s.metrics}
	if s.opts.TracerProvider != nil {
		interceptors = append(interceptors, spanOutcome{})
	}
	return []connect.HandlerOption{connect.WithReadMaxBytes(s.opts.MaxMessageBytes), connect.WithInterceptors(interceptors...)}
}

// routes mounts the served methods; any other path answers
// Unimplemented in the caller's protocol.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	errw := connect.NewErrorWriter(s.handlerOpts()...)
	anonymous := func(path string, h http.Handler) { s.served[path] = struct{}{}; mux.Handle(path, h) }
	authed := func(path string, h http.Handler) {
		s.served[path] = struct{}{}
		mux.Handle(path, s.beforeBody(path, h, errw))
	}
	anonymous(featuresProcedure, connect.NewUnaryHandler(featuresProcedure, s.features, s.handlerOpts()...))
	anonymous(gossipProcedure, connect.NewUnaryHandler(gossipProcedure, s.gossip, s.handlerOpts()...))
	type appendStream = connect.ClientStream[streams.AppendReq]
	authed(appendProcedure, connect.NewClientStreamHandler(appendProcedure,
		func(ctx context.Context, st *appendStream) (*connect.Response[streams.AppendResp], error) {
			resp, err := s.append(ctx, st)
			return resp, s.boundError(err)
		}, s.handlerOpts()...))
	authed(readProcedure, connect.NewServerStreamHandler(readProcedure,
		func(ctx context.Context, req *connect.Request[streams.ReadReq], out *connect.ServerStream[streams.ReadResp]) error {
			return s.boundError(s.read(ctx, req, out))
		}, s.handlerOpts()...))
	authed(deleteProcedure, connect.NewUnaryHandler(deleteProcedure,
		func(ctx context.Context, req *connect.Request[streams.DeleteReq]) (*connect.Response[streams.DeleteResp], error) {
			resp, err := s.remove(ctx, req)
			return resp, s.boundError(err)
		}, s.handlerOpts()...))
	type tombstoneReq = connect.Request[streams.TombstoneReq]
	authed(tombstoneProcedure, connect.NewUnaryHandler(tombstoneProcedure,
		func(ctx context.Context, req *tombstoneReq) (*connect.Response[streams.TombstoneResp], error) {
			resp, err := s.tombstone(ctx, req)
			return resp, s.boundError(err)
		}, s.handlerOpts()...))
	s.psRoutes(authed)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		err := connect.NewError(connect.CodeUnimplemented,
			fmt.Errorf("%s is not served by Skald's KurrentDB protocol", strings.TrimPrefix(r.URL.Path, "/")))
		s.metrics.observe(unservedMethod, time.Now(), err)
		recordOutcome(r.Context(), err)
		if !errw.IsSupported(r) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_ = errw.Write(w, r, err)
	})
	return mux
}

// boundError is err as a listener bound to a namespace answers it: that
// the namespace does not exist is not the caller's credential's fault
// (which is how Skald reports it to a token whose namespace is gone).
func (s *Server) boundError(err error) error {
	if !s.Insecure() || connect.CodeOf(err) != connect.CodeUnauthenticated {
		return err
	}
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
		"namespace %q, which this listener is bound to (--kurrentdb-namespace), does not exist: create it", s.opts.Namespace))
}

// Serve serves the protocol on ln until ctx ends: over TLS with cfg, or
// h2c (HTTP/2 with prior knowledge, as gRPC clients speak it without
// TLS) when cfg is nil, under Options.Connections and Limits. It returns
// nil once ctx ended. Call it once: it registers the connection metrics.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cfg *tls.Config) error {
	if s.opts.Connections != nil {
		capped, err := s.opts.Connections.Listener(ln, "kurrentdb", "KurrentDB", s.opts.Registerer)
		if err != nil {
			return fmt.Errorf("kurrentdb: %w", err)
		}
		ln = capped
	}
	srv := &http.Server{
		Handler:     s.handler,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return ctx },
		Protocols:   new(http.Protocols),
	}
	configure(srv, s.opts.Limits)
	srv.Protocols.SetHTTP2(true)
	if cfg != nil {
		srv.TLSConfig = cfg.Clone()
	} else {
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(shut); err != nil {
				srv.Close()
			}
		case <-done:
		}
	}()
	var err error
	if cfg != nil {
		err = srv.ServeTLS(ln, "", "") // the certificates are cfg's
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("kurrentdb: serve %s: %w", ln.Addr(), err)
}

// psRoutes mounts the persistent-subscription methods with mount.
func (s *Server) psRoutes(mount func(path string, h http.Handler)) {
	o := s.handlerOpts()
	mount(psCreateProcedure, connect.NewUnaryHandler(psCreateProcedure, unary(s, s.psCreate), o...))
	mount(psUpdateProcedure, connect.NewUnaryHandler(psUpdateProcedure, unary(s, s.psUpdate), o...))
	mount(psDeleteProcedure, connect.NewUnaryHandler(psDeleteProcedure, unary(s, s.psDelete), o...))
	mount(psGetInfoProcedure, connect.NewUnaryHandler(psGetInfoProcedure, unary(s, s.psGetInfo), o...))
	mount(psReplayParkedProcedure, connect.NewUnaryHandler(psReplayParkedProcedure, unary(s, s.psReplayParked), o...))
	mount(psListProcedure, connect.NewUnaryHandler(psListProcedure, unary(s, s.psList), o...))
	mount(psRestartProcedure, connect.NewUnaryHandler(psRestartProcedure, unary(s, s.psRestart), o...))
	mount(psReadProcedure, connect.NewBidiStreamHandler(psReadProcedure,
		func(ctx context.Context, st *connect.BidiStream[persistent.ReadReq, persistent.ReadResp]) error {
			return s.boundError(s.psRead(ctx, st))
		}, o...))
}

// unaryFunc is a unary method's handler.
type unaryFunc[Req, Res any] func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)

// unary is fn with its error as a bound listener answers it.
func unary[Req, Res any](s *Server, fn unaryFunc[Req, Res]) unaryFunc[Req, Res] {
	return func(ctx context.Context, req *connect.Request[Req]) (*connect.Response[Res], error) {
		resp, err := fn(ctx, req)
		return resp, s.boundError(err)
	}
}
