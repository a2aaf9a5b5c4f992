package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	autopilot "github.com/hashicorp/raft-autopilot"
	"go.opentelemetry.io/otel/trace"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/atrest"
	"github.com/skalddb/skald/node/delivery"
	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/node/transport"
)

// Node is one cluster member: the state machine, Raft around it, and the
// paths for writes and reads at every consistency level.
type Node struct {
	cfg   Config
	id    string
	log   *slog.Logger
	store *fsm.Store
	sm    *stateMachine
	feed  *nodeapi.Feed
	m     *metrics

	fs      vfs.FS          // the disk, or memory (Config.InMemory)
	dataDir string          // Config.DataDir on fs ("/" in memory)
	keys    *atrest.Keyring // data keys of an encrypted data directory; nil when not encrypted
	backups atomic.Uint64   // names in-memory backup checkpoints

	raft    *raft.Raft
	stable  logStore // the store behind logs; also Raft's stable store
	logs    raft.LogStore
	port    *transport.Port // Raft and the peer service, over mutual TLS
	peerSrv *http.Server    // the peer service on port
	trans   *transport.Raft
	addrs   *addressBook
	peers   *peerClients
	forward *forwarder
	groups  *delivery.Owner // subscription groups this node owns as leader
	notify  chan bool
	// diskKick asks diskWatch for a check now: this node just became
	// leader, and a leader must not accept writes on its predecessor's
	// word (a follower's alarm is always clear).
	diskKick chan struct{}
	// versionKick asks versionLoop for a round now (version.go).
	versionKick chan struct{}
	// nodeInfoMu orders the SetNodeInfo entries this node proposes, each
	// after reading the record it changes (version.go, cluster.go).
	nodeInfoMu sync.Mutex

	barrierTerm atomic.Uint64        // term in which this leader's Barrier completed
	leaderIndex *indexBatcher        // leaderReadIndex, coalesced
	remoteIndex *indexBatcher        // remoteReadIndex, coalesced
	inflight    inflight             // leader proposals, for the watchdog
	alarm       diskAlarm            // the leader's disk-space refusal
	settingsRes settingsReservations // creates of groups and credentials in flight

	hooks hooks // nil unless a mutant is on (hooks.go)

	tracer trace.Tracer // nil unless Config.TracerProvider is set (trace.go)

	autopilot atomic.Pointer[autopilot.Autopilot] // NewAutopilot's, stopped at shutdown
	// removals hears the servers this node removed as leader
	// (NotifyRemovals); nil: no one listens.
	removals atomic.Pointer[func(id string)]

	closeOnce sync.Once
	life      context.Context    // ends at shutdown; bounds work no single caller owns
	endLife   context.CancelFunc // ends life
	closing   <-chan struct{}    // life.Done()
	wg        sync.WaitGroup

	indexLoops indexLoops // per-namespace index maintenance (index.go)
}

// Open starts a node: it loads (or creates) the node id, opens the state
// machine and the Raft log, refuses to start when the state machine data
// is older than the log, bootstraps when asked and new, and starts Raft.
func Open(cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var fs vfs.FS = vfs.Default
	dataDir, id := cfg.DataDir, ""
	var keys *atrest.Keyring
	if cfg.InMemory {
		fs, dataDir, id = vfs.NewMem(), "/", uuid.NewString()
	} else {
		if err := os.MkdirAll(filepath.Join(cfg.DataDir, "raft"), 0o700); err != nil {
			return nil, fmt.Errorf("node: create data directory: %w", err)
		}
		if id, err = loadNodeID(cfg.DataDir); err != nil {
			return nil, err
		}
		if keys, err = openKeyring(cfg.DataDir, cfg.EncryptionKeyFile); err != nil {
			return nil, err
		}
		if keys != nil {
			fs = atrest.NewFS(fs, keys)
		}
	}
	if cfg.wrapFS != nil {
		fs = cfg.wrapFS(fs)
	}
	n := &Node{
		cfg: cfg, id: id, log: cfg.Logger.With("node-id", id), feed: nodeapi.NewFeed(), m: newMetrics(),
		addrs: newAddressBook(), notify: make(chan bool, 16), diskKick: make(chan struct{}, 1), fs: fs, dataDir: dataDir,
		versionKick: make(chan struct{}, 1), keys: keys,
	}
	if cfg.InMemory {
		n.log.Warn("IN-MEMORY NODE: the data, the Raft log and snapshots are kept in memory only; nothing survives a restart")
	}
	n.life, n.endLife = context.WithCancel(context.Background())
	n.closing = n.life.Done()
	if cfg.TLS != nil {
		cfg.TLS.LogTo(n.log)
	}
	creds, err := clusterCredsFor(cfg, id)
	if err != nil {
		return nil, err
	}
	if n.port, err = transport.Open(cfg.RaftAddr, cfg.RaftAdvertise, creds, cfg.DialMap, n.log); err != nil {
		return nil, err
	}
	if cfg.TracerProvider != nil {
		n.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	n.peers = newPeerClients(n.port.PeerTransport())
	n.forward = newForwarder(n.life, n.peers, cfg.ApplyTimeout, func(w int) { n.m.forwardBatch.Observe(float64(w)) })
	n.forward.traced = n.tracer != nil
	observeReads := func(r int) { n.m.readIndexBatch.Observe(float64(r)) }
	n.installMutant()
	n.groups = delivery.New(n.life, groupHost{n}, delivery.Config{
		NotOwner: errNotLeader, ApplyTimeout: cfg.ApplyTimeout, Heartbeat: cfg.GroupHeartbeat, Checkpoint: n.hooks.groupCheckpoint,
	})
	n.leaderIndex = newIndexBatcher(n.life, n.leaderReadIndex, cfg.ReadWait, observeReads)
	n.remoteIndex = newIndexBatcher(n.life, n.remoteReadIndex, cfg.ReadWait, observeReads)
	n.indexLoops.n = n
	if err := n.open(); err != nil {
		n.closeResources()
		return nil, err
	}
	// Loops start once the node is open (a failed Open leaves none); the
	// hint names every namespace the replay above gave indexes.
	ensure := n.indexLoops.ensure
	n.sm.onIndex.Store(&ensure)
	n.startIndexLoops()
	if cfg.Registerer != nil {
		if err := n.m.register(cfg.Registerer, n); err != nil {
			n.shutdown(false)
			return nil, fmt.Errorf("node: register metrics: %w", err)
		}
	}
	// Each loop calls n.wg.Done when it returns.
	for _, loop := range []func(){
		n.leaderLoop, n.watchLeader, n.watchdog, n.diskWatch, n.expiryLoop, n.typeIndexLoop, n.versionLoop,
		n.memberAddrLoop,
	} {
		n.wg.Add(1)
		go loop()
	}
	return n, nil
}

func (n *Node) open() error {
	store, err := fsm.Open(fsm.Options{
		Dir: n.fs.PathJoin(n.dataDir, "fsm"), FS: n.fs, MaxOpenNamespaces: n.cfg.MaxOpenNamespaces,
		MemTableSize: n.cfg.MemTableSize, CacheSize: n.cfg.CacheSize, Logger: n.log,
		IndexMutant: indexMutant(n.cfg.Mutant),
		// An in-memory node keeps every index in memory stores (fsm/indexmem.go).
		IndexMemory: n.cfg.InMemory, IndexMemoryLimit: n.cfg.IndexMemoryLimit,
	})
	if err != nil {
		return err
	}
	n.store = store
	floor, err := store.Floor()
	if err != nil {
		return err
	}
	n.sm = newStateMachine(store, n.feed, n.m, max(floor.Index, store.AppliedIndex()))
	n.sm.before = n.cfg.beforeApply
	if n.tracer != nil {
		n.sm.clock = newApplyClock()
	}
	storageDir := n.cfg.DataDir
	n.sm.onFailure = func(r any) { n.log.Error("STORAGE FAILURE, stopping: " + storageFailure(r, storageDir)) }
	raftDir := n.fs.PathJoin(n.dataDir, "raft")
	if n.cfg.InMemory {
		mem := inmemLogStore{raft.NewInmemStore()}
		n.stable, n.logs = mem, mem
	} else {
		var kind string
		if n.stable, n.logs, kind, err = openLogStore(raftDir, n.cfg.LogStore, n.keys, n.log, n.m.observeLogSync); err != nil {
			return err
		}
		n.log.Info("raft log store opened", "store", kind, "dir", raftDir)
		if err := checkLogCoverage(store, n.logs, n.cfg.DataDir); err != nil {
			return err
		}
	}
	snaps, err := newSnapshotStore(store, n.fs, n.fs.PathJoin(raftDir, "snapshots"), n.log, n.m)
	if err != nil {
		return err
	}
	n.trans = openTransport(n.cfg, n.addrs, n.port)
	// Raft looks up its own address on every AppendEntries it sends or
	// answers; knowing it spares the fallback (an error and a log call).
	n.addrs.set(raft.ServerID(n.id), n.trans.LocalAddr())
	conf := raftConfig(n.cfg, n.id, n.notify)
	if err := n.recoverFromPeersFile(conf, snaps); err != nil {
		return err
	}
	if err := bootstrapIfNew(n, conf, n.logs, n.stable, snaps); err != nil {
		return err
	}
	if n.raft, err = raft.NewRaft(conf, n.sm, n.logs, n.stable, snaps, n.trans); err != nil {
		return fmt.Errorf("node: start raft: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(newPeerHandler(n))
	n.peerSrv = n.port.ServePeers(mux)
	n.log.Info("node started", "raft-addr", n.trans.LocalAddr(), "api-addr", n.cfg.APIAddr, "floor", floor.Index)
	return nil
}

// ID returns the node's Raft server id.
func (n *Node) ID() string { return n.id }

// RaftAddr returns the address the Raft transport advertises.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// APIAddr returns the API address this node registers for forwarding.
func (n *Node) APIAddr() string { return n.cfg.APIAddr }

// Feed returns the change feed for subscribers.
func (n *Node) Feed() *nodeapi.Feed { return n.feed }

// IsLeader reports whether this node is the Raft leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the current leader's id and Raft address ("" when none
// is known).
func (n *Node) Leader() (id, raftAddr string) {
	addr, lid := n.raft.LeaderWithID()
	return string(lid), string(addr)
}

// AppliedIndex returns the index of the last entry whose effects reads see.
func (n *Node) AppliedIndex() uint64 { return n.sm.appliedIndex() }

// NewAutopilot builds raft-autopilot over this node's Raft (it needs the
// *raft.Raft, which stays inside node) for membership, which supplies the
// application side and starts and stops it as leadership moves. A node has
// one: a later call replaces it. The node stops it when it shuts down, before
// Raft.
func (n *Node) NewAutopilot(app autopilot.ApplicationIntegration, opts ...autopilot.Option) *autopilot.Autopilot {
	ap := autopilot.New(n.raft, app, opts...)
	n.autopilot.Store(ap)
	return ap
}

// SetPeerAddress records the current Raft address of a server (from
// membership); "" forgets it.
func (n *Node) SetPeerAddress(id, raftAddr string) {
	n.addrs.set(raft.ServerID(id), raft.ServerAddress(raftAddr))
}

// AddVoter adds (or updates) a voting server. Leader only. A server new
// to the configuration must run a state machine at least as new as this
// one (admit).
func (n *Node) AddVoter(ctx context.Context, id, raftAddr string) error {
	if err := n.admit(ctx, id, raftAddr); err != nil {
		return err
	}
	return n.configChange(ctx, n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout))
}

// AddNonvoter adds a non-voting server (to be promoted once healthy).
// Leader only; admitted as AddVoter.
func (n *Node) AddNonvoter(ctx context.Context, id, raftAddr string) error {
	if err := n.admit(ctx, id, raftAddr); err != nil {
		return err
	}
	return n.configChange(ctx, n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout))
}

func (n *Node) configChange(ctx context.Context, f raft.Future) error {
	err := waitFuture(ctx, f)
	if errors.Is(err, raft.ErrNotLeader) {
		return errNotLeader
	}
	return err
}

// TransferLeadership hands leadership to another voter (to id when set)
// and waits until it moved. A transfer Raft gave up on (another one
// runs, or the target did not take over in time) is
// nodeapi.ErrTransferNotDone.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		cfg := n.raft.GetConfiguration()
		if err := cfg.Error(); err != nil {
			return err
		}
		var addr raft.ServerAddress
		for _, s := range cfg.Configuration().Servers {
			if string(s.ID) == id {
				addr = s.Address
			}
		}
		if addr == "" {
			return fmt.Errorf("%w: %s", nodeapi.ErrUnknownServer, id)
		}
		f = n.raft.LeadershipTransferToServer(raft.ServerID(id), addr)
	}
	err := n.configChange(ctx, f)
	// Raft says "leadership transfer timeout" only as text.
	if errors.Is(err, raft.ErrLeadershipTransferInProgress) || (err != nil && strings.Contains(err.Error(), "leadership transfer timeout")) {
		return fmt.Errorf("%w: %v; the leader is unchanged, try again", nodeapi.ErrTransferNotDone, err)
	}
	return err
}

// leaderLoop reacts to leadership changes: a new leader commits a Barrier
// (so the state machine holds every earlier entry before it serves
// linearizable reads) and registers its API address for forwarding.
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.closing:
			return
		case isLeader := <-n.notify:
			if isLeader {
				select {
				case n.diskKick <- struct{}{}:
				default:
				}
				n.onLeader()
			} else {
				n.groups.StopAll(errNotLeader)
			}
		}
	}
}

func (n *Node) onLeader() {
	term := n.raft.CurrentTerm()
	n.log.Info("became leader", "term", term)
	// Raft drops futures still queued when it shuts down, so waiting on
	// one without the node's life could block leaderLoop, and with it
	// Close's wg.Wait, forever.
	barrier := n.raft.Barrier(n.cfg.ApplyTimeout)
	if n.cfg.leaderBarrier != nil {
		barrier = n.cfg.leaderBarrier(barrier)
	}
	if err := waitFuture(n.life, barrier); err != nil {
		n.log.Warn("leader barrier failed", "term", term, "err", err)
		return
	}
	n.barrierTerm.Store(term)
	defer n.kickVersions() // once this node's own address is registered
	n.nodeInfoMu.Lock()
	defer n.nodeInfoMu.Unlock()
	if addr, ok := n.store.NodeAddr(n.id); ok && addr == n.cfg.APIAddr {
		return
	}
	ctx, cancel := context.WithTimeout(n.life, n.cfg.ApplyTimeout)
	defer cancel()
	cmd := &fsmv1.Command{Kind: &fsmv1.Command_SetNodeInfo{SetNodeInfo: &fsmv1.SetNodeInfo{NodeId: n.id, ApiAddress: n.cfg.APIAddr}}}
	if _, err := n.applyLocal(ctx, cmd); err != nil {
		n.log.Warn("register API address", "err", err)
	}
}

// Close shuts the node down gracefully: a leader first hands leadership to
// another voter, then Raft stops, and the state machine flushes and closes.
func (n *Node) Close() error { return n.shutdown(true) }

// Halt stops the node without handing leadership over: to the others it
// looks like a crash (tests and the chaos harness use it).
func (n *Node) Halt() error { return n.shutdown(false) }

func (n *Node) shutdown(transfer bool) error {
	var err error
	n.closeOnce.Do(func() {
		if transfer && n.raft != nil && n.raft.State() == raft.Leader && n.voters() > 1 {
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
			terr := waitFuture(ctx, n.raft.LeadershipTransfer())
			cancel()
			if terr != nil {
				n.log.Warn("leadership transfer on shutdown", "err", terr)
			}
		}
		n.endLife()
		n.indexLoops.close() // before wg.Wait: no loop is added after it
		if n.store != nil {
			// A state machine waiting for a resource must not hold Raft's
			// shutdown (it waits for the apply goroutine).
			n.store.Interrupt()
		}
		if ap := n.autopilot.Load(); ap != nil {
			<-ap.Stop()
		}
		if n.raft != nil {
			err = n.raft.Shutdown().Error()
		}
		n.wg.Wait()
		n.groups.Wait()
		err = errors.Join(err, n.closeResources())
		n.log.Info("node stopped")
	})
	return err
}

func (n *Node) voters() int {
	servers, err := n.Servers()
	if err != nil {
		return 0
	}
	v := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			v++
		}
	}
	return v
}

func (n *Node) closeResources() error {
	var errs []error
	if n.peerSrv != nil {
		errs = append(errs, n.peerSrv.Close())
	}
	if n.trans != nil {
		errs = append(errs, n.trans.Close()) // closes the port
	} else if n.port != nil {
		errs = append(errs, n.port.Close())
	}
	if n.stable != nil {
		errs = append(errs, n.stable.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	n.peers.close()
	return errors.Join(errs...)
}

// sleepCtx waits d or until ctx ends or the node closes.
func (n *Node) sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.closing:
		return nodeapi.ErrShutdown
	}
}
