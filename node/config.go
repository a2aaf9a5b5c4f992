package node

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/skalddb/skald/node/transport"
)

// Config configures a Node. Zero values mean the defaults stated per field.
type Config struct {
	// DataDir holds node-id, raft/ and fsm/. Required unless InMemory.
	DataDir string

	// InMemory keeps everything (the state machine's Pebble stores, the
	// Raft log and stable state, snapshots) in memory and nothing on disk,
	// for tests and demos: NOTHING SURVIVES A RESTART, and a restarted
	// node is a new server with a new id. DataDir and LogStore are unused.
	InMemory bool

	// RaftAddr is the address the Raft transport binds ("127.0.0.1:0" picks
	// a port). RaftAdvertise, when set, is the address other nodes dial;
	// the default is the bound address, which must then be specific (not
	// 0.0.0.0).
	RaftAddr      string
	RaftAdvertise string

	// APIAddr is the host:port where this node serves its HTTP API, which
	// it registers so that clients can be pointed to the leader.
	// Required.
	APIAddr string

	// ClusterSecret secures the cluster port (RaftAddr: Raft and the
	// node-to-node peer service) when TLS is nil: every member derives the
	// same CA from it and trusts only certificates that CA signed (mutual
	// TLS; see transport.NewSecretCreds). Every member must have the same
	// value. Empty with no TLS: a random secret, so no other node can join
	// this one or be joined by it.
	ClusterSecret string

	// TLS, when set, secures the cluster port with mutual TLS with these
	// certificates instead (the operator's own CA; ClusterSecret is then
	// unused). The API port serves TLS with the same certificates.
	TLS *transport.TLS

	// Bootstrap makes a node with no Raft state bootstrap a single-server
	// cluster of itself. A node with state never bootstraps again.
	Bootstrap bool

	// Timing holds the Raft timeouts; the default is ProductionTiming.
	Timing Timing

	// SnapshotThreshold and SnapshotInterval decide when Raft takes a
	// snapshot (with the Vault-style store this only syncs Pebble and
	// records the durable floor). Defaults 16384 entries, 30 s.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration

	// TrailingLogs is how many log entries stay after a snapshot, so a
	// follower a little behind catches up from the log instead of a
	// snapshot. Default 65536.
	TrailingLogs uint64

	// ApplyTimeout bounds one proposal on the leader. Default 10 s.
	ApplyTimeout time.Duration

	// LeaderWait is how long a write or a linearizable read waits for a
	// leader (during an election) before failing with nodeapi.ErrNoLeader.
	// Default 5 s.
	LeaderWait time.Duration

	// GroupHeartbeat is the silence after which a subscription group's
	// consumer stream gets a heartbeat. Default 15 s.
	GroupHeartbeat time.Duration

	// ReadWait bounds how long a SESSION read waits for its min index, and
	// a follower for the leader's read index, when the caller's context
	// has no earlier deadline. Default 5 s.
	ReadWait time.Duration

	// WatchdogTimeout: a leader whose oldest pending proposal is older
	// than this hands leadership away (hashicorp/raft #503: a leader with a
	// stalled disk keeps heartbeating). Default 30 s; negative disables.
	WatchdogTimeout time.Duration

	// LogStore picks the Raft log store of a new data directory:
	// LogStoreWAL or LogStoreBolt; empty means LogStoreDefault. An existing directory
	// keeps the store it has; asking for the other one is an error.
	LogStore string

	// EncryptionKeyFile names the store key (32 raw bytes or 64 hex
	// digits) that encrypts every file under DataDir (internal/atrest):
	// Pebble stores, the raft-wal log and snapshots. A directory is
	// encrypted or not from its creation; see openKeyring. Encryption needs
	// LogStoreWAL (bolt has no file-system layer to encrypt through).
	EncryptionKeyFile string

	// MinFreeDisk: while any voter has fewer free bytes for its data, the
	// leader refuses writes (nodeapi.ErrStorageFull) instead of proposing entries
	// that could fill a disk and stop a node. 0 turns the check off.
	MinFreeDisk uint64

	// DiskCheckInterval is how often the leader asks the voters for their
	// free space (when MinFreeDisk is set). Default 1 s.
	DiskCheckInterval time.Duration

	// MaxNamespaces caps the namespaces of the cluster, the admin namespace
	// included: a create past it is refused (fsm.NamespaceLimitError). The
	// leader stamps its value into each create it proposes and apply
	// enforces it, so every replica agrees whatever its own setting; the
	// leader's value is the one that counts. 0 means no limit. Reloadable
	// only by restarting the node.
	MaxNamespaces int64

	// MaxGroupsPerNamespace and MaxCredentialsPerNamespace cap the
	// subscription groups and the credentials one namespace may hold: every
	// node keeps each namespace's credentials in memory and the leader runs
	// a dispatcher per group, so a namespace owner must not be able to add
	// them without bound. The leader checks its own applied state before
	// proposing a create (nodeapi.SettingsLimitError; creates in flight at
	// once may pass it by as many). 0 means the default, 1000; negative
	// means no limit.
	MaxGroupsPerNamespace      int
	MaxCredentialsPerNamespace int

	// RetentionInterval is how often the leader proposes an expiry entry
	// for each namespace with retention policies (fsm/retention.go): how
	// late a message past its max-age or max-count may still be read.
	// Default 10 s; negative disables expiry (policies are kept, nothing
	// is removed).
	RetentionInterval time.Duration

	// TypeIndexInterval is how often the leader looks for namespaces whose
	// type index does not hold every message yet (written before it, or
	// created while a server did not know it) and backfills them
	// (node/typeindex.go). Default 1 s; negative disables the backfill.
	TypeIndexInterval time.Duration

	// VersionInterval is how often the leader asks every server for its
	// state machine version and records the answers that changed, which
	// the version gate decides from (node/version.go); it also asks when
	// it gains leadership and when a server registers. Default 5 s;
	// negative: only the gate's own questions (tests).
	VersionInterval time.Duration

	// IndexInterval is the shortest time between the starts of two index
	// rounds of a namespace woken by new entries (node/index.go), so that
	// the rounds of a busy namespace batch its writes; a write after a
	// quiet spell is indexed at once, and an index read at LINEARIZABLE
	// or SESSION starts a round without waiting for it. Default 5 ms;
	// negative: no wait.
	IndexInterval time.Duration

	// MaxOpenNamespaces, MemTableSize and CacheSize are passed to the state
	// machine (fsm.Options, which documents them and their defaults).
	MaxOpenNamespaces int
	MemTableSize      uint64
	CacheSize         int64
	// IndexMemoryLimit bounds the bytes of one namespace's memory-mode
	// indexes on this node (fsm.Options.IndexMemoryLimit; 0: the default).
	IndexMemoryLimit int64

	// Logger receives the node's, Raft's and Pebble's logs. Default: discard.
	Logger *slog.Logger

	// olderRaftFraming makes the node speak Raft as the version before
	// skald-raft/2 did, hashicorp/raft's framing only (tests of a cluster
	// in the middle of a rolling upgrade).
	olderRaftFraming bool

	// Registerer receives the node's metrics. Default: none registered.
	Registerer prometheus.Registerer

	// TracerProvider, when set, turns tracing on: the node records
	// OpenTelemetry spans of the writes of traced requests (the forward
	// hop, the proposal, its commit and apply; trace.go) and propagates
	// their trace context to the leader over the peer service. Default
	// nil: no span, no header, no cost.
	TracerProvider trace.TracerProvider

	// MetricsTenantLabels labels the subscription-group metrics by
	// namespace and group. Default false: each is summed over the groups
	// this node owns, so the metrics name no tenant (anyone who can scrape
	// them would otherwise learn every namespace and group name).
	MetricsTenantLabels bool

	// DialMap redirects outgoing peer connections (testing: the chaos
	// harness's per-link proxies). Not with TLS.
	DialMap transport.DialMap

	// Mutant names a deliberate bug to switch on (mutant.go); only
	// binaries built with -tags mutants accept one. Empty: none.
	Mutant string

	// beforeApply, when set (tests only), runs before every state machine
	// batch: a test stalls the state machine with it.
	beforeApply func()
	// leaderBarrier, when set (tests only), replaces the Barrier future a
	// new leader waits on.
	leaderBarrier func(raft.Future) raft.Future
	// wrapFS, when set (tests only), wraps the file system the state
	// machine keeps its data on: a test injects faults through it.
	wrapFS func(vfs.FS) vfs.FS
	// olderStateMachine, when set (tests only), makes this node report
	// fsm.StateMachineVersion - 1 to its peers: an older server, as far as
	// the others can tell.
	olderStateMachine bool
}

// Timing is the set of Raft timeouts.
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
}

// ProductionTiming suits a LAN of 3-5 voters (raft defaults; Consul's
// raft_multiplier 1), except CommitTimeout. A follower learns that an
// entry committed only from the leader's next AppendEntries, which is the
// next write or, when writes pause, CommitTimeout later: at raft's 50 ms a
// subscriber on a follower saw a quiet stream's events 54 ms late (p50,
// 20 appends/s); at 5 ms, 4 ms. The price is idle traffic: the 3-node
// cluster used 170 ms of CPU per second idle, against 53 ms.
var ProductionTiming = Timing{
	HeartbeatTimeout:   time.Second,
	ElectionTimeout:    time.Second,
	LeaderLeaseTimeout: 500 * time.Millisecond,
	CommitTimeout:      5 * time.Millisecond,
}

// FastTiming suits in-process test clusters on loopback, with room for the
// race detector on 2 cores shared with other test binaries.
var FastTiming = Timing{
	HeartbeatTimeout:   300 * time.Millisecond,
	ElectionTimeout:    300 * time.Millisecond,
	LeaderLeaseTimeout: 250 * time.Millisecond,
	CommitTimeout:      5 * time.Millisecond,
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if out.DataDir == "" && !out.InMemory {
		return out, errors.New("node: Config.DataDir is required")
	}
	if out.InMemory && out.LogStore != "" {
		return out, errors.New("node: Config.LogStore does not apply to an in-memory node")
	}
	if out.EncryptionKeyFile != "" && out.InMemory {
		return out, errors.New("node: Config.EncryptionKeyFile does not apply to an in-memory node")
	}
	if out.EncryptionKeyFile != "" && out.LogStore == LogStoreBolt {
		return out, errEncryptedBolt
	}
	if out.APIAddr == "" {
		return out, errors.New("node: Config.APIAddr is required")
	}
	if err := checkMutant(out.Mutant); err != nil {
		return out, err
	}
	if out.ClusterSecret == "" && out.TLS == nil {
		b := make([]byte, 32)
		rand.Read(b)
		out.ClusterSecret = hex.EncodeToString(b)
	}
	if out.RaftAddr == "" {
		out.RaftAddr = "127.0.0.1:8081"
	}
	if out.Timing == (Timing{}) {
		out.Timing = ProductionTiming
	}
	if out.SnapshotThreshold == 0 {
		out.SnapshotThreshold = 16384
	}
	if out.SnapshotInterval == 0 {
		out.SnapshotInterval = 30 * time.Second
	}
	if out.TrailingLogs == 0 {
		out.TrailingLogs = 65536
	}
	if out.ApplyTimeout == 0 {
		out.ApplyTimeout = 10 * time.Second
	}
	if out.DiskCheckInterval == 0 {
		out.DiskCheckInterval = time.Second
	}
	if out.RetentionInterval == 0 {
		out.RetentionInterval = DefaultRetentionInterval
	}
	if out.TypeIndexInterval == 0 {
		out.TypeIndexInterval = time.Second
	}
	if out.VersionInterval == 0 {
		out.VersionInterval = 5 * time.Second
	}
	if out.IndexInterval == 0 {
		out.IndexInterval = 5 * time.Millisecond
	}
	if out.LeaderWait == 0 {
		out.LeaderWait = 5 * time.Second
	}
	if out.GroupHeartbeat == 0 {
		out.GroupHeartbeat = 15 * time.Second
	}
	if out.ReadWait == 0 {
		out.ReadWait = 5 * time.Second
	}
	if out.MaxGroupsPerNamespace == 0 {
		out.MaxGroupsPerNamespace = DefaultMaxPerNamespace
	}
	if out.MaxCredentialsPerNamespace == 0 {
		out.MaxCredentialsPerNamespace = DefaultMaxPerNamespace
	}
	if out.WatchdogTimeout == 0 {
		out.WatchdogTimeout = 30 * time.Second
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out, nil
}

// DefaultRetentionInterval is Config.RetentionInterval's default.
const DefaultRetentionInterval = 10 * time.Second
