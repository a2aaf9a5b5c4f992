package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/logbridge"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/membership"
	"github.com/skalddb/skald/node"
	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/node/transport"
	"github.com/skalddb/skald/rpc"
)

type serverFlags struct {
	nodeName, dataDir, httpAddr, raftAddr, advertiseHTTP, advertiseRaft string
	adminToken, clusterSecret, logLevel, logFormat, cors                string
	gossipAddr, advertiseGossip, join, gossipKey                        string
	bootstrapExpect, compressMinBytes                                   int
	cleanupDead, leaveOnTerm, inMemory                                  bool
	minQuorum                                                           uint
	tlsCert, tlsKey, tlsCA                                              string
	encryptionKeyFile                                                   string
	snapshotThreshold, trailingLogs                                     uint64
	commitTimeout, retentionInterval                                    time.Duration
	memTableBytes, cacheBytes, minFreeDisk, memoryLimit                 uint64
	maxOpenNamespaces, gcPercent                                        int
	maxNamespaces, indexMemoryLimit                                     int64
	maxGroupsPerNamespace, maxCredentialsPerNamespace                   int
	mutant, dialMap, logStore                                           string
	metricsAddr                                                         string
	kurrentDB                                                           kurrentDBFlags
	metricsTenantLabels                                                 bool
	otlpEndpoint                                                        string
	otlpSampleRatio                                                     float64
	// secretWarnings are logged once the logger exists (command.ReadSecretFiles).
	secretWarnings []string
	limits         apiLimitFlags
	// printConfig, when set (--print-config), writes the effective
	// settings instead of running.
	printConfig func(io.Writer)
}

func parseServerFlags(args []string, stderr io.Writer) (*serverFlags, error) {
	f := &serverFlags{}
	fs := flag.NewFlagSet("skald server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host, _ := os.Hostname()
	fs.StringVar(&f.nodeName, "node-name", host, "a human-readable name for this node (logs, status)")
	fs.StringVar(&f.dataDir, "data-dir", "./skald-data", "directory for the node id, Raft log and Pebble data")
	fs.BoolVar(&f.inMemory, "in-memory", false, "keep the data, the Raft log and snapshots in memory, for tests and demos: NOTHING SURVIVES A RESTART (--data-dir is not used)")
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8080", "API address: Connect, gRPC, gRPC-Web, EventoDB HTTP, /metrics, /healthz")
	fs.StringVar(&f.raftAddr, "raft-addr", "127.0.0.1:8081", "Raft address")
	fs.StringVar(&f.advertiseHTTP, "advertise-http", "", "API address other nodes use (default: --http-addr)")
	fs.StringVar(&f.advertiseRaft, "advertise-raft", "", "Raft address other nodes use (default: --raft-addr)")
	fs.StringVar(&f.adminToken, "admin-token", "", "admin token (the 'default' namespace's) used at first start; generated and printed when empty")
	fs.StringVar(&f.clusterSecret, "cluster-secret", "", "secret shared by all nodes, at least 16 bytes: keys the mutual TLS of the Raft port (Raft and node-to-node calls); default: derived from --gossip-key (random for a single node, which nobody can then join)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&f.cors, "cors-origins", "", "comma-separated origins allowed to call from browsers ('*' for any); members' own consoles are always allowed")
	fs.StringVar(&f.gossipAddr, "gossip-addr", "127.0.0.1:7946", "gossip address (used with --join or --bootstrap-expect)")
	fs.StringVar(&f.advertiseGossip, "advertise-gossip", "", "gossip address other nodes use (default: --gossip-addr)")
	fs.StringVar(&f.join, "join", "", "comma-separated gossip addresses of members to join; retried until one answers")
	fs.IntVar(&f.bootstrapExpect, "bootstrap-expect", 0, "bootstrap a new cluster once this many servers see each other")
	fs.StringVar(&f.gossipKey, "gossip-key", "", "base64 gossip encryption key (16, 24 or 32 bytes); also secures node-to-node calls")
	fs.BoolVar(&f.cleanupDead, "cleanup-dead-servers", true, "remove failed servers from Raft while quorum stays safe")
	fs.UintVar(&f.minQuorum, "min-quorum", 3, "never remove servers below this many voters")
	fs.BoolVar(&f.leaveOnTerm, "leave-on-terminate", false, "on SIGTERM, leave the cluster (be removed from Raft) instead of only handing over leadership")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate: turns on TLS for the API port and mutual TLS for Raft and node-to-node calls")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM key of --tls-cert")
	fs.Uint64Var(&f.snapshotThreshold, "raft-snapshot-threshold", 16384, "log entries between Raft snapshots (each syncs Pebble and lets the log be truncated)")
	fs.Uint64Var(&f.trailingLogs, "raft-trailing-logs", 65536, "log entries kept after a snapshot, so a lagging follower catches up without a snapshot transfer")
	fs.DurationVar(&f.commitTimeout, "raft-commit-timeout", node.ProductionTiming.CommitTimeout, "longest a follower waits to learn of a commit when writes pause (subscribers on followers see events this much later); lower costs idle traffic")
	fs.StringVar(&f.logStore, "raft-log-store", "", "Raft log store of a new data directory: wal (default: hashicorp/raft-wal, append-only segments, one fsync per batch) or bolt (raft-boltdb, two fsyncs per batch, about a third more CPU per write); an existing directory keeps its own")
	fs.StringVar(&f.encryptionKeyFile, "encryption-key-file", "", "turn on encryption at rest: the store key (32 raw bytes or 64 hex digits, e.g. openssl rand -hex 32) that wraps the data keys of every file under --data-dir; a data directory is encrypted from its creation or never (docs/security.md, At rest); needs the wal raft log store")
	fs.Uint64Var(&f.memTableBytes, "memtable-bytes", fsm.DefaultMemTableSize, "largest Pebble memtable of one namespace; a busy namespace holds up to two (one flushing); larger means less compaction CPU per write")
	fs.Uint64Var(&f.cacheBytes, "cache-bytes", fsm.DefaultCacheSize, "Pebble block cache shared by all namespaces")
	fs.IntVar(&f.gcPercent, "gc-percent", DefaultGCPercent, "Go GC percent (GOGC): the heap grows this much over live data between collections; higher spends less CPU per request and more memory (GOGC in the environment wins)")
	fs.Uint64Var(&f.memoryLimit, "memory-limit-bytes", 0, "soft limit of the Go heap (GOMEMLIMIT); near it the GC runs as often as needed whatever --gc-percent says; 0: 75% of the container's or machine's memory (GOMEMLIMIT in the environment wins)")
	fs.Uint64Var(&f.minFreeDisk, "min-free-disk", 256<<20, "the leader refuses writes (reads go on) while any voter has fewer free bytes for its data; 0 turns the check off")
	fs.DurationVar(&f.retentionInterval, "retention-interval", node.DefaultRetentionInterval, "how often the leader applies retention policies (max-age, max-count; skald retention --help): the longest a message past its limits may still be read; negative turns expiry off")
	fs.Int64Var(&f.indexMemoryLimit, "index-memory-limit", fsm.DefaultIndexMemoryLimit, "the most bytes the memory-mode indexes of one namespace may hold on this node; past it they fail here (every index of an --in-memory server is one)")
	fs.IntVar(&f.maxOpenNamespaces, "max-open-namespaces", fsm.DefaultMaxOpenNamespaces, "namespaces kept open; past this the least recently used idle one is flushed and closed")
	fs.IntVar(&f.maxGroupsPerNamespace, "max-groups-per-namespace", node.DefaultMaxPerNamespace, "most subscription groups one namespace holds; a create past it is refused (ResourceExhausted, EventoDB SETTINGS_LIMIT); the leader's value counts; -1: no limit")
	fs.IntVar(&f.maxCredentialsPerNamespace, "max-credentials-per-namespace", node.DefaultMaxPerNamespace, "most credentials one namespace holds (each is kept in memory on every node); a create past it is refused (ResourceExhausted, EventoDB SETTINGS_LIMIT); the leader's value counts; -1: no limit")
	fs.Int64Var(&f.maxNamespaces, "max-namespaces", 0, "most namespaces the cluster holds, the admin namespace included; a create past it is refused (ResourceExhausted, EventoDB NAMESPACE_LIMIT); the leader's value counts; 0: no limit")
	fs.IntVar(&f.compressMinBytes, "compress-min-bytes", rpc.DefaultCompressMinBytes, "gzip API replies of at least this many bytes when the client accepts it (0: every reply); on a LAN compression costs more CPU than it saves")
	fs.StringVar(&f.dialMap, "dial-map", "", "testing only: comma-separated from=to address pairs; peer connections (Raft, node-to-node calls) to 'from' go to 'to' (the chaos harness's per-link proxies)")
	if node.MutantsBuilt {
		fs.StringVar(&f.mutant, "mutant", "", fmt.Sprintf("switch on a deliberate bug for the chaos harness: one of %v", node.Mutants))
	}
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM CA that signs every node's certificate (files are reloaded when they change)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "also serve /metrics here, every series and no token (bind it where only monitoring reaches); the API port's /metrics serves series naming a namespace or group to the admin token only")
	fs.StringVar(&f.kurrentDB.addr, "kurrentdb-addr", "", "also serve KurrentDB's gRPC client protocol here, so its official clients read and append (docs/kurrentdb.md); TLS with --tls-cert, else h2c; default: off")
	fs.StringVar(&f.kurrentDB.advertise, "kurrentdb-advertise", "", "KurrentDB address clients use, in Gossip (default: --kurrentdb-addr); every node's must be at the same offset from its API port")
	fs.StringVar(&f.kurrentDB.namespace, "kurrentdb-namespace", "", "bind the KurrentDB listener to this namespace WITHOUT AUTHENTICATION, every caller its owner (the official clients send no credentials without TLS); default: each call acts for its Basic or Bearer Skald credential")
	fs.BoolVar(&f.metricsTenantLabels, "metrics-tenant-labels", false, "label the subscription-group metrics by namespace and group (default: summed, naming no tenant)")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "turn tracing on: send OpenTelemetry spans (API call, forward to the leader, Raft commit, apply, reply) to this OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (a URL without a path posts to /v1/traces); default: off")
	fs.Float64Var(&f.otlpSampleRatio, "otlp-sample-ratio", 1, "with --otlp-endpoint, the share of requests traced that arrive without a trace context (0 to 1); a caller's W3C traceparent decides for its own requests")
	secretFiles := serverSecretFiles(f)
	command.AddSecretFileFlags(fs, secretFiles)
	f.limits.register(fs)
	configPath := fs.String("config", "", "YAML file of settings, one key per flag (data-dir: /var/lib/skald); a flag or SKALD_<FLAG> overrides it (deploy/skald.yaml)")
	printCfg := fs.Bool("print-config", false, "print the effective settings (secrets masked) with where each came from, and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: skald server [flags]\n\nRuns a node. Every flag can also be set as SKALD_<FLAG> (e.g. SKALD_DATA_DIR) or as a key of the --config file; a flag wins over the environment, the environment over the file.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, command.Exit(2, fmt.Errorf("unexpected arguments: %v", fs.Args()))
	}
	if v, ok := os.LookupEnv(command.EnvName("config")); ok && *configPath == "" {
		*configPath = v
	}
	sources, err := layerFlags(fs, *configPath)
	if err != nil {
		return nil, command.Exit(2, err)
	}
	if *printCfg {
		secrets := []string{}
		for _, s := range secretFiles {
			secrets = append(secrets, s.Name)
		}
		// Before the secret files are read or anything is checked: it
		// shows the settings, and a host other than the node's may lack
		// the files.
		f.printConfig = func(w io.Writer) { printConfig(w, fs, sources, secrets) }
		return f, nil
	}
	warnings, err := command.ReadSecretFiles(secretFiles)
	if err != nil {
		return nil, command.Exit(2, err)
	}
	f.secretWarnings = warnings
	if set := f.tlsCert != "" || f.tlsKey != "" || f.tlsCA != ""; set && (f.tlsCert == "" || f.tlsKey == "" || f.tlsCA == "") {
		return nil, command.Exit(2, errors.New("TLS needs all of --tls-cert, --tls-key and --tls-ca"))
	}
	if _, err := parseDialMap(f.dialMap); err != nil {
		return nil, command.Exit(2, err)
	}
	if f.bootstrapExpect < 0 {
		return nil, command.Exit(2, errors.New("--bootstrap-expect must not be negative"))
	}
	if f.compressMinBytes < 0 {
		return nil, command.Exit(2, fmt.Errorf("--compress-min-bytes must not be negative, got %d", f.compressMinBytes))
	}
	if f.inMemory && f.logStore != "" {
		return nil, command.Exit(2, errors.New("--raft-log-store does not apply with --in-memory"))
	}
	if node.CheckLogStore(f.logStore) != nil {
		return nil, command.Exit(2, fmt.Errorf("--raft-log-store %q: want bolt or wal", f.logStore))
	}
	if f.encryptionKeyFile != "" {
		warning, err := checkEncryptionKeyFile(f)
		if err != nil {
			return nil, command.Exit(2, err)
		}
		if warning != "" {
			f.secretWarnings = append(f.secretWarnings, warning)
		}
	}
	if f.gcPercent < 10 || f.gcPercent > 10000 {
		return nil, command.Exit(2, fmt.Errorf("--gc-percent must be between 10 and 10000, got %d", f.gcPercent))
	}
	if f.memTableBytes < 1<<20 || f.memTableBytes > 1<<30 {
		return nil, command.Exit(2, fmt.Errorf("--memtable-bytes must be between 1 MiB and 1 GiB, got %d", f.memTableBytes))
	}
	if f.cacheBytes < 1<<20 || f.cacheBytes > 1<<40 {
		return nil, command.Exit(2, fmt.Errorf("--cache-bytes must be between 1 MiB and 1 TiB, got %d", f.cacheBytes))
	}
	for _, l := range []struct {
		flag  string
		value int
	}{{"--max-groups-per-namespace", f.maxGroupsPerNamespace}, {"--max-credentials-per-namespace", f.maxCredentialsPerNamespace}} {
		if l.value == 0 || l.value < -1 {
			return nil, command.Exit(2, fmt.Errorf("%s must be 1 or more, or -1 (no limit), got %d", l.flag, l.value))
		}
	}
	if f.maxNamespaces < 0 {
		return nil, command.Exit(2, fmt.Errorf("--max-namespaces must be 0 (no limit) or more, got %d", f.maxNamespaces))
	}
	if err := f.limits.validate(); err != nil {
		return nil, command.Exit(2, err)
	}
	if f.indexMemoryLimit < 1 {
		return nil, command.Exit(2, fmt.Errorf("--index-memory-limit must be at least 1 byte, got %d", f.indexMemoryLimit))
	}
	if f.maxOpenNamespaces < 1 {
		return nil, command.Exit(2, fmt.Errorf("--max-open-namespaces must be at least 1, got %d", f.maxOpenNamespaces))
	}
	if err := checkOTLPEndpoint(f.otlpEndpoint); err != nil {
		return nil, command.Exit(2, err)
	}
	if f.otlpSampleRatio < 0 || f.otlpSampleRatio > 1 {
		return nil, command.Exit(2, fmt.Errorf("--otlp-sample-ratio must be between 0 and 1, got %v", f.otlpSampleRatio))
	}
	if f.commitTimeout < time.Millisecond || f.commitTimeout > node.ProductionTiming.HeartbeatTimeout {
		return nil, command.Exit(2, fmt.Errorf("--raft-commit-timeout must be between 1ms and %s, got %s", node.ProductionTiming.HeartbeatTimeout, f.commitTimeout))
	}
	return f, nil
}

// parseDialMap parses --dial-map ("from=to,from=to").
func parseDialMap(s string) (transport.DialMap, error) {
	if s == "" {
		return nil, nil
	}
	m := transport.DialMap{}
	for _, pair := range strings.Split(s, ",") {
		from, to, ok := strings.Cut(pair, "=")
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("--dial-map: %q is not from=to", pair)
		}
		m[from] = to
	}
	return m, nil
}

// clustered reports whether the node forms a cluster by gossip.
func (f *serverFlags) clustered() bool { return f.join != "" || f.bootstrapExpect > 0 }

// minClusterSecret is the shortest --cluster-secret taken: it keys the
// mutual TLS of the cluster port, so a guessable one would let strangers in.
const minClusterSecret = 16

// secrets returns the gossip key and the cluster secret, which keys the
// cluster port's mutual TLS (Raft and node-to-node calls): --cluster-secret,
// else one derived from the gossip key, else (a single node, which nobody
// may join) a random one.
func (f *serverFlags) secrets() (key []byte, secret string, err error) {
	if f.gossipKey != "" {
		if key, err = base64.StdEncoding.DecodeString(f.gossipKey); err != nil {
			return nil, "", command.Exit(2, fmt.Errorf("--gossip-key: not base64: %v", err))
		}
		if n := len(key); n != 16 && n != 24 && n != 32 {
			return nil, "", command.Exit(2, fmt.Errorf("--gossip-key: %d bytes, want 16, 24 or 32", n))
		}
	}
	switch {
	case f.clusterSecret != "":
		if len(f.clusterSecret) < minClusterSecret {
			return nil, "", command.Exit(2, fmt.Errorf("--cluster-secret: %d bytes, want at least %d (it keys the cluster's mutual TLS; e.g. openssl rand -hex 32)", len(f.clusterSecret), minClusterSecret))
		}
		return key, f.clusterSecret, nil
	case key != nil:
		sum := sha256.Sum256(append([]byte("skald cluster secret\x00"), key...))
		return key, hex.EncodeToString(sum[:]), nil
	case f.clustered():
		return nil, "", command.Exit(2, errors.New("a cluster needs --gossip-key (or --cluster-secret): every node must share it"))
	}
	b := make([]byte, 32)
	rand.Read(b)
	return nil, hex.EncodeToString(b), nil
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, command.Exit(2, fmt.Errorf("--log-level %q: %w", level, err))
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, command.Exit(2, fmt.Errorf("--log-format %q: want text or json", format))
}

// Run runs skald server with args, the words after "server", until ctx
// ends or the node fails.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServerFlags(args, stderr)
	if err != nil {
		return err
	}
	if f.printConfig != nil {
		f.printConfig(stdout)
		return nil
	}
	log, err := newLogger(f.logLevel, f.logFormat, stderr)
	if err != nil {
		return err
	}
	log = log.With("node", f.nodeName)
	for _, w := range f.secretWarnings {
		log.Warn(w)
	}
	gc := applyGCSettings(f.gcPercent, f.memoryLimit, os.Getenv, totalMemory)
	log.Info("go runtime", gc.logAttrs()...)
	if f.adminToken != "" {
		if name, err := nstoken.Parse(f.adminToken); err != nil || name != nstoken.AdminNamespace {
			return command.Exit(2, fmt.Errorf("--admin-token must be a token of the %q namespace (ns_ZGVmYXVsdA_<64 hex>)", nstoken.AdminNamespace))
		}
	}
	gossipKey, secret, err := f.secrets()
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return fmt.Errorf("listen on --http-addr: %w", err)
	}
	defer ln.Close()
	maxConns := f.limits.connections(f.maxOpenNamespaces)
	perIP := f.limits.connectionsPerIP(maxConns)
	logFDLimit(log, maxConns, f.maxOpenNamespaces)
	log.Info("client connection caps (API and KurrentDB listeners together)", "max-connections", maxConns, "max-connections-per-ip", perIP)
	apiAddr := f.advertiseHTTP
	if apiAddr == "" {
		apiAddr = ln.Addr().String()
	}
	var tlsFiles *transport.TLS
	if f.tlsCert != "" {
		files := transport.TLSFiles{CertFile: f.tlsCert, KeyFile: f.tlsKey, CAFile: f.tlsCA}
		if tlsFiles, err = transport.NewTLS(files); err != nil {
			return err
		}
	}
	dials, _ := parseDialMap(f.dialMap)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if f.metricsAddr != "" {
		stopMetrics, err := serveMetrics(f.metricsAddr, reg, tlsFiles, log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	var tracer trace.TracerProvider // nil: tracing off, nothing started
	if f.otlpEndpoint != "" {
		tp, err := newTracerProvider(ctx, f.otlpEndpoint, f.otlpSampleRatio, f.nodeName, log)
		if err != nil {
			return err
		}
		// Deferred before the node opens, so it runs after the node and
		// the API closed: the last spans are flushed.
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				log.Warn("flush spans", "otlp-endpoint", f.otlpEndpoint, "err", err)
			}
		}()
		tracer = tp
		log.Info("tracing on", "otlp-endpoint", f.otlpEndpoint, "sample-ratio", f.otlpSampleRatio)
	}
	timing := node.ProductionTiming
	timing.CommitTimeout = f.commitTimeout
	dataDir := f.dataDir
	if f.inMemory {
		dataDir = ""
		fmt.Fprintln(stderr, "WARNING: --in-memory: data, Raft log and snapshots live in this process's memory only; everything is lost when it stops")
	}
	if err := privateDataDir(dataDir, log); err != nil {
		return err
	}
	n, err := node.Open(node.Config{
		DataDir: dataDir, InMemory: f.inMemory, Timing: timing, RaftAddr: f.raftAddr, RaftAdvertise: f.advertiseRaft, APIAddr: apiAddr,
		ClusterSecret: secret, Bootstrap: !f.clustered(), Logger: log, Registerer: reg, TLS: tlsFiles,
		SnapshotThreshold: f.snapshotThreshold, TrailingLogs: f.trailingLogs, Mutant: f.mutant, DialMap: dials,
		MinFreeDisk: f.minFreeDisk, MemTableSize: f.memTableBytes, CacheSize: int64(f.cacheBytes), MaxOpenNamespaces: f.maxOpenNamespaces, LogStore: f.logStore,
		EncryptionKeyFile: f.encryptionKeyFile,
		IndexMemoryLimit:  f.indexMemoryLimit,
		RetentionInterval: f.retentionInterval, MetricsTenantLabels: f.metricsTenantLabels, MaxNamespaces: f.maxNamespaces,
		MaxGroupsPerNamespace: f.maxGroupsPerNamespace, MaxCredentialsPerNamespace: f.maxCredentialsPerNamespace,
		TracerProvider: tracer,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := n.Close(); err != nil {
			log.Error("close node", "err", err)
		}
	}()
	var (
		m      *membership.Membership
		left   = make(chan struct{})
		apiOpt = rpc.Options{Logger: log, Registerer: reg, Gatherer: reg, CompressMinBytes: compressOpt(f.compressMinBytes),
			Limits: f.limits.rpcLimits(), NodeName: f.nodeName, TracerProvider: tracer}
	)
	if f.clustered() {
		var join []string
		if f.join != "" {
			join = strings.Split(f.join, ",")
		}
		m, err = membership.Start(n, membership.Config{
			GossipAddr: f.gossipAddr, AdvertiseAddr: f.advertiseGossip, Join: join, BootstrapExpect: f.bootstrapExpect,
			Key: gossipKey, Name: f.nodeName, RaftAddr: n.RaftAddr(), APIAddr: apiAddr,
			CleanupDeadServers: f.cleanupDead, MinQuorum: f.minQuorum, Logger: log,
		})
		if err != nil {
			return err
		}
		defer m.Close()
		var once sync.Once
		apiOpt.Health = m.ServerHealth
		lastContact, trailing := m.HealthThresholds()
		apiOpt.HealthRule = nodeapi.HealthRule{LastContactThreshold: lastContact, MaxTrailingLogs: trailing}
		apiOpt.Names = m.MemberName
		apiOpt.Leave = func(ctx context.Context) error {
			if err := m.Leave(ctx); err != nil {
				return err
			}
			once.Do(func() { close(left) })
			return nil
		}
	}

	if f.cors != "" {
		apiOpt.CORSOrigins = strings.Split(f.cors, ",")
	}
	baseCtx, cancelStreams := context.WithCancel(context.Background())
	defer cancelStreams()
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:     rpc.NewHandler(n, apiOpt),
		Protocols:   protocols,
		BaseContext: func(net.Listener) context.Context { return baseCtx },
		// net/http's own lines (TLS handshake errors, ...) as log lines.
		ErrorLog: logbridge.Std(log, "http", slog.LevelWarn),
	}
	apiOpt.Limits.Configure(srv) // read, header and idle timeouts; write deadlines are per request
	// One set of caps for every client listener: their connections take
	// the same file descriptors (--max-connections' default), and one
	// address holds no more by spreading over ports.
	conns := rpc.NewConnCaps(maxConns, perIP)
	capped, err := conns.Listener(ln, "rpc", "API", reg)
	if err != nil {
		return err
	}
	ln = capped
	serveErr := make(chan error, 1)
	if tlsFiles != nil {
		// Clients may present certificates; they authenticate with tokens,
		// nodes with the cluster secret.
		srv.TLSConfig = tlsFiles.ServerConfig(tls.VerifyClientCertIfGiven)
		protocols.SetHTTP2(true)
		go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { serveErr <- srv.Serve(ln) }()
	}
	if f.kurrentDB.addr != "" {
		stopKurrentDB, err := serveKurrentDB(f.kurrentDB, n, apiAddr, apiOpt, conns, tlsFiles, log)
		if err != nil {
			return err
		}
		defer stopKurrentDB()
	}
	log.Info("serving", "http-addr", ln.Addr().String(), "raft-addr", n.RaftAddr(), "data-dir", dataDir, "in-memory", f.inMemory, "node-id", n.ID())

	// Until the admin namespace exists /readyz says no; it is created in
	// the background so that a stop or a leave is still noticed meanwhile.
	adminCtx, stopAdmin := context.WithCancel(ctx)
	adminDone := make(chan struct{})
	go func() {
		defer close(adminDone)
		if err := ensureAdmin(adminCtx, n, f.adminToken, stdout, log); err != nil && adminCtx.Err() == nil {
			log.Error("admin namespace", "err", err)
		}
	}()
	defer func() { stopAdmin(); <-adminDone }() // before n.Close

	select {
	case <-ctx.Done():
		log.Info("shutting down")
		if m != nil && f.leaveOnTerm {
			lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := m.Leave(lctx); err != nil {
				log.Error("leave on terminate", "err", err)
			}
			cancel()
		}
	case <-left:
		log.Info("left the cluster: shutting down")
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	}
	cancelStreams() // end subscriptions so Shutdown can finish
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	return nil
}

// ensureAdmin makes sure the "default" namespace (whose token is the
// admin token) exists, creating it on the first start of a cluster with
// the given token or a generated one, which it prints once. Every node
// runs it until it sees the namespace in its own state: whichever node
// leads creates it, so a leader change during the first start does not
// leave the cluster without one. Only the node whose proposal was stored
// prints a generated token (the stored hash is its token's). On later
// starts the stored token stays; a different --admin-token is reported,
// not applied. It returns when ctx ends, with ctx's error.
func ensureAdmin(ctx context.Context, n *node.Node, token string, stdout io.Writer, log *slog.Logger) error {
	generated := token == ""
	if generated {
		var err error
		if token, err = nstoken.New(nstoken.AdminNamespace); err != nil {
			return fmt.Errorf("generate the admin token: %w", err)
		}
	}
	hash := nstoken.Hash(token)
	var lastErr error
	for attempt := 0; ; attempt++ {
		// A cluster forming by bootstrap-expect may wait for its last
		// member; a follower waits for the leader's creation to arrive.
		if _, err := n.LinearizableIndex(ctx); err != nil {
			lastErr = fmt.Errorf("wait for a leader: %w", err)
		} else if info, ok := n.Namespace(nstoken.AdminNamespace); ok {
			same := string(info.TokenHash) == string(hash)
			switch {
			case generated && same:
				fmt.Fprintf(stdout, "Admin token (shown only now; keep it): %s\n", token)
			case !generated && !same:
				log.Warn("--admin-token differs from the stored admin token; the stored one stays valid")
			}
			return nil
		} else if n.IsLeader() {
			_, err := n.CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: nstoken.AdminNamespace, Description: "admin", TokenHash: hash})
			if err == nil || errors.Is(err, fsm.ErrNamespaceExists) {
				continue // read it back
			}
			lastErr = fmt.Errorf("create the admin namespace: %w", err)
		}
		select {
		case <-ctx.Done():
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return lastErr
		case <-time.After(min(time.Duration(attempt+1)*50*time.Millisecond, time.Second)):
		}
	}
}

// compressOpt maps --compress-min-bytes (0: compress every reply) to
// rpc.Options.CompressMinBytes, where 0 means the default and a negative
// value compresses everything.
func compressOpt(flag int) int {
	if flag == 0 {
		return -1
	}
	return flag
}
