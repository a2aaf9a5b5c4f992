package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	connectcors "connectrpc.com/cors"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/cors"
	"go.opentelemetry.io/otel/trace"

	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
	"github.com/skalddb/skald/console"
	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/buildinfo"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/rpc/evdb"
)

// Backend is everything the API needs from the node (*node.Node).
type Backend interface {
	events
	tenants
	members
	groups
	credentialStore
	Credential(name string, id uint64) (fsm.CredentialInfo, uint64, bool)
	indexBackend
	LinearizableIndex(ctx context.Context) (uint64, error)
	Backup(ctx context.Context, w io.Writer, start func(size int64, meta fsm.SnapshotMeta)) (fsm.SnapshotMeta, error)
}

// Options configures the API handler.
type Options struct {
	Logger *slog.Logger
	// Gatherer serves /metrics (series naming a namespace or group to the
	// admin token only: metricsHandler) and Registerer receives the RPC
	// metrics. Both default to a registry of their own.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// CORSOrigins lists the origins browsers may call from; "*" allows
	// any. Default: none but the members' own consoles (allowOrigin).
	CORSOrigins []string
	// Subscribe bounds subscriptions (heartbeat, max lag).
	Subscribe subscribeConfig
	// Health, when set, reports a server's health and last contact as
	// autopilot judges it (ok false when unknown here) for Cluster.Status.
	// Where it has no verdict, HealthRule (autopilot's thresholds; zero:
	// autopilot's defaults) judges what the servers report.
	Health     func(id string) (healthy bool, lastContact time.Duration, ok bool)
	HealthRule nodeapi.HealthRule
	// NodeName is this node's --node-name and Names, when set, gives any
	// server's (from gossip), for Cluster.Status.
	NodeName string
	Names    func(id string) string
	// Leave, when set, makes this node leave the cluster (Cluster.Leave);
	// the server stops after answering.
	Leave func(ctx context.Context) error
	// CompressMinBytes is the smallest reply the skald.v1 services
	// compress when a client accepts gzip; 0 means DefaultCompressMinBytes,
	// negative compresses every reply.
	CompressMinBytes int
	// Limits bounds time, reply sizes and unknown-token checks per client
	// (limits.go).
	Limits Limits
	// TracerProvider, when set, turns tracing on (trace.go): a server span
	// per API call, under the caller's W3C traceparent. Give the node the
	// same provider (node.Config.TracerProvider) for the spans of the
	// write path. Default nil: nothing traced, nothing installed.
	TracerProvider trace.TracerProvider
}

// DefaultCompressMinBytes keeps gzip off for all but very large replies:
// compressing a 100-message read (about 20 KiB) costs the server several
// times the CPU of the read itself and saves less time than it costs on a
// LAN. Clients across a slow link may want it lower.
const DefaultCompressMinBytes = 1 << 20

// NewHandler returns the HTTP handler of the API port: the skald.v1
// services over Connect, gRPC and gRPC-Web, gRPC reflection and health,
// the EventoDB API (/rpc, /subscribe, /import, /health, /version), the
// web console (/ui/), /healthz, /readyz, /metrics and
// (admin only) /debug/pprof/. Browsers may call from the configured CORS
// origins and from any member's console. Unknown paths get EventoDB's JSON
// 404, and calls of unknown procedures UNIMPLEMENTED in the caller's RPC
// protocol.
func NewHandler(b Backend, opts Options) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		reg := prometheus.NewRegistry()
		opts.Registerer, opts.Gatherer = reg, reg
	}
	limits := opts.Limits.withDefaults()
	subscribe := opts.Subscribe
	if subscribe.ScanBudget <= 0 {
		subscribe.ScanBudget = limits.ScanBudget
	}
	tokens := newUnknownTokens(b.LinearizableIndex, limits.UnknownTokenPace, limits.UnknownTokenTTL)
	used := &lastUsed{}
	audit := newAuditor(log, opts.Registerer)
	replies := newReplyBudget(limits.ReplyBudgetBytes, limits.ReplyBudgetWait, opts.Registerer)
	auth := authenticator{b: b, unknown: tokens, used: used, audit: audit, log: log, replies: replies}
	credOps := credentialOps{b: b, used: used, audit: audit}
	compressMin := opts.CompressMinBytes
	switch {
	case compressMin == 0:
		compressMin = DefaultCompressMinBytes
	case compressMin < 0:
		compressMin = 0
	}
	metrics := newRPCMetrics(opts.Registerer)
	interceptors := []connect.Interceptor{metrics, auth, auditChanges{audit}, leaderHint{b}}
	if opts.TracerProvider != nil {
		interceptors = append(interceptors, spanOutcome{})
	}
	handlerOpts := append([]connect.HandlerOption{
		connect.WithInterceptors(interceptors...),
		connect.WithReadMaxBytes(maxRequestBytes),
		connect.WithCompressMinBytes(compressMin),
	}, jsonCodecs()...)
	errw := connect.NewErrorWriter(handlerOpts...)
	mux := http.NewServeMux()
	unknown := newUnknownProcedures()
	handleService := func(path string, h http.Handler) {
		mux.Handle(path, withUnknownMethods(strings.Trim(path, "/"), h, unknown))
	}
	handleAPI := func(path string, h http.Handler) { // token from the headers first
		handleService(path, auth.beforeBody(h, errw, metrics))
	}
	handleAPI(skaldv1connect.NewEventStoreHandler(&eventStore{b: b, log: log, sub: subscribe, pageBytes: limits.PageBytes, scanBudget: limits.ScanBudget, replyTimeout: limits.WriteTimeout,
		streamInFlight: limits.AppendStreamInFlight, metrics: metrics, hint: leaderHint{b}, creds: b}, handlerOpts...))
	handleAPI(skaldv1connect.NewNamespacesHandler(&namespaces{b: b, log: log, audit: audit, createWait: tokens.createWait()}, handlerOpts...))
	handleAPI(skaldv1connect.NewClusterHandler(&cluster{b: b, log: log, health: opts.Health, rule: opts.HealthRule, names: opts.Names, name: opts.NodeName, leave: opts.Leave}, handlerOpts...))
	handleAPI(skaldv1connect.NewSubscriptionsHandler(&subscriptions{b: b, log: log}, handlerOpts...))
	handleAPI(skaldv1connect.NewCredentialsHandler(&credentials{ops: credOps, log: log}, handlerOpts...))
	handleAPI(skaldv1connect.NewIndexesHandler(&indexes{b: b, log: log, pageBytes: limits.PageBytes, scanBudget: limits.ScanBudget}, handlerOpts...))

	services := []string{skaldv1connect.EventStoreName, skaldv1connect.NamespacesName, skaldv1connect.ClusterName, skaldv1connect.SubscriptionsName,
		skaldv1connect.CredentialsName, skaldv1connect.IndexesName}
	reflector := grpcreflect.NewStaticReflector(append(services, grpchealth.HealthV1ServiceName)...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker(services...)))

	ev := &eventodb{b: b, log: log, sub: subscribe, build: buildinfo.Read(), limits: limits, unknown: tokens,
		metrics: metrics, used: used, audit: audit, creds: credOps, replies: replies}
	mux.HandleFunc("/rpc", ev.rpc)
	mux.HandleFunc("GET /subscribe", ev.subscribe)
	mux.HandleFunc("/import", ev.importHandler)
	mux.HandleFunc("GET /health", ev.health)
	mux.HandleFunc("GET /version", ev.serveVersion)
	ev.traced = opts.TracerProvider != nil
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if isRPC(r) {
			unknown.ServeHTTP(w, r) // an RPC client reads its own error format
			return
		}
		evdb.NotFound(w, r)
	})

	ui := console.Handler()
	mux.Handle("GET /ui/", ui) // GET patterns match HEAD too
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.Handle("GET /readyz", &readiness{b: b})
	if opts.Gatherer != nil {
		mux.Handle("GET /metrics", metricsHandler(auth, opts.Gatherer))
	}
	mux.Handle("GET /admin/backup", adminOnly(auth, backupHandler(b, log)))
	mux.Handle("/debug/pprof/", adminOnly(auth, http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/profile", adminOnly(auth, http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/trace", adminOnly(auth, http.HandlerFunc(pprof.Trace)))

	withCORS := cors.New(cors.Options{
		AllowOriginFunc: allowOrigin(b, opts.CORSOrigins),
		AllowedMethods:  connectcors.AllowedMethods(),
		AllowedHeaders:  append(connectcors.AllowedHeaders(), "Authorization", NamespaceHeader),
		ExposedHeaders:  connectcors.ExposedHeaders(),
		MaxAge:          7200,
	}).Handler(mux)
	var h http.Handler = deadlines{limits: limits, errw: errw, next: withCORS}
	if len(opts.CORSOrigins) == 0 {
		// Only members' consoles: requests from no browser (no Origin) skip
		// CORS entirely, as they did before the console, and their replies
		// carry no Vary header.
		h = deadlines{limits: limits, errw: errw, next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Origin") == "" {
				mux.ServeHTTP(w, r)
				return
			}
			withCORS.ServeHTTP(w, r)
		})}
	}
	if opts.TracerProvider != nil {
		h = newTracing(opts.TracerProvider, h)
	}
	return h
}

// allowOrigin allows browsers on the configured origins ("*": any) and on
// the console of every member, http or https on a registered API address:
// the console served by one node keeps working through another when its
// own goes away.
func allowOrigin(b Backend, configured []string) func(origin string) bool {
	return func(origin string) bool {
		for _, o := range configured {
			if o == "*" || o == origin {
				return true
			}
		}
		host, ok := strings.CutPrefix(origin, "http://")
		if !ok {
			if host, ok = strings.CutPrefix(origin, "https://"); !ok {
				return false
			}
		}
		for _, addr := range b.NodeAddrs() {
			if addr == host {
				return true
			}
		}
		return false
	}
}

// backupHandler streams a consistent checkpoint of the whole state (a tar
// of exact Content-Length) for skald backup.
func backupHandler(b Backend, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started := false
		_, err := b.Backup(r.Context(), w, func(size int64, meta fsm.SnapshotMeta) {
			started = true
			w.Header().Set("Content-Type", "application/x-tar")
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
			w.Header().Set("Skald-Backup-Index", strconv.FormatUint(meta.Index, 10))
			w.WriteHeader(http.StatusOK)
		})
		if err != nil {
			log.Error("backup", "err", err)
			if !started {
				http.Error(w, "backup failed: "+err.Error(), http.StatusServiceUnavailable)
			}
		}
	})
}

// adminOnly serves h only to requests with the admin token.
func adminOnly(auth authenticator, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, err := auth.authenticate(r.Context(), r.Header)
		if err != nil || !callerFrom(ctx).admin {
			http.Error(w, "admin token required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// readiness answers /readyz: 503 while the node's storage is stalled
// (node.Node.StorageStall); otherwise 200 once the node has a leader, has applied
// everything the leader had committed when it was asked (so a restarted
// node is not sent traffic while it replays) and holds the admin
// namespace (so the admin token works here: on a new cluster the server
// creates it just after the first leader is elected); afterwards 200
// while a leader is known. The admin namespace cannot be deleted, so once
// seen it stays.
//
// A failed index (node.Node.FailedIndexes) leaves the node ready: the
// failure is confined to that index's queries on this node, and since
// replicas usually fail an index for the same reason, refusing would take
// every replica out of service for one index. The 200's body names each
// failed index after "ready", one a line, and skald_index_failed alerts.
type readiness struct {
	b     Backend
	ready atomic.Bool
}

func (h *readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A state machine waiting for a resource (file descriptors, disk
	// space) applies nothing until it is free: not ready, saying why.
	if st, ok := h.b.(interface{ StorageStall() error }); ok {
		if err := st.StorageStall(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	if leader, _ := h.b.Leader(); leader == "" {
		http.Error(w, "no leader", http.StatusServiceUnavailable)
		return
	}
	if !h.ready.Load() {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := h.b.LinearizableIndex(ctx); err != nil {
			http.Error(w, "catching up: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if _, ok := h.b.Namespace(nstoken.AdminNamespace); !ok {
			http.Error(w, "the admin namespace is not created yet", http.StatusServiceUnavailable)
			return
		}
		h.ready.Store(true)
	}
	body := []byte("ready\n")
	if fi, ok := h.b.(interface {
		FailedIndexes() ([]fsm.IndexFailure, error)
	}); ok {
		failed, err := fi.FailedIndexes()
		if err != nil {
			body = fmt.Appendf(body, "failed indexes unknown: %v\n", err)
		}
		for _, f := range failed {
			body = fmt.Appendf(body, "index %q of namespace %q failed on this node: %s (rebuild it)\n",
				f.Index, f.Namespace, f.Reason)
		}
	}
	w.Write(body)
}

// rpcMetrics counts RPCs and their latency by procedure and code, on both
// APIs. A Connect call's procedure is its path ("/skald.v1.EventStore/Append")
// and its code connect's name ("ok", "aborted"); an EventoDB call's
// procedure is "eventodb/" and its /rpc method ("eventodb/stream.write";
// "eventodb/rpc" for a call refused before its method was known,
// "eventodb/import" for /import) and its code "ok" or the EventoDB error
// code in lower case ("stream_version_conflict"). Both label sets are
// bounded: unknown procedures and methods never become labels.
type rpcMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// series caches each label pair's counter and histogram (seriesKey →
	// *rpcSeries), so a call looks its two series up once, not hashing
	// its labels into both vectors each time. It holds what the vectors
	// hold: one entry per procedure and code seen, a bounded set.
	series sync.Map
}

// seriesKey is one label pair of the RPC metrics.
type seriesKey struct{ procedure, code string }

// rpcSeries are one label pair's series.
type rpcSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// evdbPrefix begins the procedure label of every EventoDB call;
// evdbRefused is the label of a /rpc call refused before its method was
// known.
const (
	evdbPrefix  = "eventodb/"
	evdbRefused = evdbPrefix + "rpc"
)

func newRPCMetrics(reg prometheus.Registerer) *rpcMetrics {
	m := &rpcMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "rpc", Name: "requests_total", Help: "RPCs handled (Connect procedures and EventoDB methods), by procedure and code.",
		}, []string{"procedure", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "skald", Subsystem: "rpc", Name: "duration_seconds", Help: "RPC latency (Connect procedures and EventoDB methods), by procedure and code.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"procedure", "code"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(err)
			}
		}
	}
	return m
}

func (m *rpcMetrics) observe(procedure string, start time.Time, err error) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	m.observeCode(procedure, code, start)
}

// observeCode counts one call that started at start and ended with code.
func (m *rpcMetrics) observeCode(procedure, code string, start time.Time) {
	key := seriesKey{procedure, code}
	v, ok := m.series.Load(key)
	if !ok {
		v, _ = m.series.LoadOrStore(key, &rpcSeries{requests: m.requests.WithLabelValues(procedure, code), latency: m.latency.WithLabelValues(procedure, code)})
	}
	se := v.(*rpcSeries)
	se.requests.Inc()
	se.latency.Observe(time.Since(start).Seconds())
}

// evCodeLabel is the code label of an EventoDB error code.
func evCodeLabel(code string) string { return strings.ToLower(code) }

func (m *rpcMetrics) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		resp, err := next(ctx, req)
		m.observe(req.Spec().Procedure, start, err)
		return resp, err
	}
}

func (m *rpcMetrics) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (m *rpcMetrics) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		if conn.Spec().Procedure == skaldv1connect.EventStoreAppendStreamProcedure && err == nil {
			return nil // each of its requests was counted (appendstream.go)
		}
		m.observe(conn.Spec().Procedure, start, err)
		return err
	}
}
