package membership

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	autopilot "github.com/hashicorp/raft-autopilot"

	"github.com/skalddb/skald/internal/logbridge"
)

// Node is what membership needs from the local cluster member.
type Node interface {
	ID() string
	IsLeader() bool
	Leader() (id, raftAddr string)
	NewAutopilot(app autopilot.ApplicationIntegration, opts ...autopilot.Option) *autopilot.Autopilot
	HasState() bool
	BootstrapCluster(servers []raft.Server) error
	Servers() ([]raft.Server, error)
	AddVoter(ctx context.Context, id, raftAddr string) error
	AddNonvoter(ctx context.Context, id, raftAddr string) error
	RemoveServer(ctx context.Context, id string) error
	NotifyRemovals(f func(id string))
	TransferLeadership(ctx context.Context, id string) error
	SetPeerAddress(id, raftAddr string)
	RegisterAPIAddress(ctx context.Context, id, apiAddr string) error
	ServerStats(ctx context.Context, id string) (lastContact time.Duration, lastTerm, lastIndex uint64, err error)
}

// Config configures membership. Zero values mean the stated defaults.
type Config struct {
	// GossipAddr is host:port memberlist binds; AdvertiseAddr, when set,
	// is what other nodes dial (default: GossipAddr).
	GossipAddr    string
	AdvertiseAddr string
	// Join lists gossip addresses of existing members; the node keeps
	// trying them until one answers.
	Join []string
	// BootstrapExpect: once this many servers with the same value see each
	// other and none has Raft state, they bootstrap one configuration.
	BootstrapExpect int
	// Key encrypts gossip (16, 24 or 32 bytes); Label binds packets to one
	// cluster. A node with another key or label cannot join.
	Key   []byte
	Label string
	// Name is a human-readable node name carried in the metadata.
	Name string
	// RaftAddr and APIAddr are this node's advertised addresses.
	RaftAddr, APIAddr string

	// Timing: LAN defaults, or Local for tests on loopback.
	Local bool
	// ReconcileInterval is how often the leader reconciles gossip into the
	// Raft configuration. Default 1 s (100 ms with Local).
	ReconcileInterval time.Duration
	// RejoinInterval is how often a node that joined pushes its state to
	// its seeds again: a node restarted at a new address under the same id
	// is accepted only once the old address was declared dead. Default
	// 30 s (500 ms with Local).
	RejoinInterval time.Duration
	// DeadNodeReclaimTime: after this, a dead node's name (its id) may
	// rejoin from another address. Default 30 s (1 s with Local).
	DeadNodeReclaimTime time.Duration

	// Autopilot settings (Consul's and Vault's defaults).
	CleanupDeadServers      bool          // remove failed servers while quorum stays safe
	MinQuorum               uint          // never shrink voters below this; default 3
	LastContactThreshold    time.Duration // default 10 s (500 ms with Local)
	ServerStabilizationTime time.Duration // default 10 s (300 ms with Local)
	MaxTrailingLogs         uint64        // default 1000

	Logger *slog.Logger
}

func (c *Config) withDefaults() Config {
	out := *c
	pick := func(d *time.Duration, prod, local time.Duration) {
		if *d == 0 {
			*d = prod
			if out.Local {
				*d = local
			}
		}
	}
	pick(&out.ReconcileInterval, time.Second, 100*time.Millisecond)
	pick(&out.RejoinInterval, 30*time.Second, 500*time.Millisecond)
	pick(&out.DeadNodeReclaimTime, 30*time.Second, time.Second)
	pick(&out.LastContactThreshold, 10*time.Second, 500*time.Millisecond)
	pick(&out.ServerStabilizationTime, 10*time.Second, 300*time.Millisecond)
	if out.MinQuorum == 0 {
		out.MinQuorum = 3
	}
	if out.MaxTrailingLogs == 0 {
		out.MaxTrailingLogs = 1000
	}
	if out.Label == "" {
		out.Label = "skald"
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// Membership runs gossip, bootstrap-expect, reconciliation and autopilot
// for one node.
type Membership struct {
	cfg  Config
	node Node
	log  *slog.Logger
	ml   *memberlist.Memberlist
	ap   *autopilot.Autopilot

	kick   chan struct{} // wakes the reconcile loop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Owned by the reconcile loop: the Raft configuration it saw last, and
	// when each server it has seen leave the configuration went.
	lastServers map[string]bool
	removedAt   map[string]time.Time
	addFailed   map[string]*addFailure // servers whose last add failed

	mu       sync.Mutex
	removing map[raft.ServerID]bool // failed servers being removed
	// failed holds the servers autopilot removed (or is removing) because
	// they failed, until the reconcile loop has seen them leave the
	// configuration: such a server may come back at once.
	failed map[string]time.Time
	// removed holds the servers this node removed as leader (a leave, or
	// a removal by hand) and when, until the reconcile loop takes them
	// into removedAt: a leader that took over moments before the removal
	// has no configuration history to see it by.
	removed map[string]time.Time
	// members is our copy of gossip membership, kept from memberlist's
	// event callbacks (memberlist's own Node structs change under its
	// lock, and its Members omits dead and left nodes).
	members map[string]member
}

// Start joins the gossip pool and starts the background loops.
func Start(node Node, cfg Config) (*Membership, error) {
	cfg = cfg.withDefaults()
	m := &Membership{cfg: cfg, node: node, log: cfg.Logger.With("component", "membership"),
		kick: make(chan struct{}, 1), removing: make(map[raft.ServerID]bool), failed: make(map[string]time.Time),
		removed: make(map[string]time.Time), members: make(map[string]member)}
	node.NotifyRemovals(m.noteRemoved)
	mc, err := m.memberlistConfig()
	if err != nil {
		return nil, err
	}
	if m.ml, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("membership: start gossip on %s: %w", cfg.GossipAddr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	// Autopilot runs on the leader only; the reconcile loop starts and
	// stops it as leadership comes and goes.
	m.ap = node.NewAutopilot(&pilot{m}, autopilot.WithLogger(logbridge.HCLog(m.cfg.Logger, "autopilot")),
		autopilot.WithReconcileInterval(cfg.ReconcileInterval), autopilot.WithUpdateInterval(cfg.ReconcileInterval))
	m.wg.Add(2)
	go m.joinLoop(ctx)
	go m.reconcileLoop(ctx)
	if cfg.BootstrapExpect > 0 {
		m.wg.Add(1)
		go m.bootstrapLoop(ctx)
	}
	m.log.Info("gossip started", "gossip-addr", cfg.GossipAddr, "join", strings.Join(cfg.Join, ","), "bootstrap-expect", cfg.BootstrapExpect)
	return m, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.Atoi(port)
	return host, p, err
}

func (m *Membership) memberlistConfig() (*memberlist.Config, error) {
	mc := memberlist.DefaultLANConfig()
	if m.cfg.Local {
		mc = memberlist.DefaultLocalConfig()
	}
	mc.Name = m.node.ID()
	host, port, err := splitHostPort(m.cfg.GossipAddr)
	if err != nil {
		return nil, fmt.Errorf("membership: gossip address %q: %w", m.cfg.GossipAddr, err)
	}
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = host, port
	if m.cfg.AdvertiseAddr != "" {
		if mc.AdvertiseAddr, mc.AdvertisePort, err = splitHostPort(m.cfg.AdvertiseAddr); err != nil {
			return nil, fmt.Errorf("membership: gossip advertise address %q: %w", m.cfg.AdvertiseAddr, err)
		}
		// memberlist wants an IP; containers advertise host names.
		if net.ParseIP(mc.AdvertiseAddr) == nil {
			ips, err := net.LookupIP(mc.AdvertiseAddr)
			if err != nil || len(ips) == 0 {
				return nil, fmt.Errorf("membership: resolve gossip advertise host %q: %v", mc.AdvertiseAddr, err)
			}
			mc.AdvertiseAddr = ips[0].String()
		}
	}
	if len(m.cfg.Key) > 0 {
		switch len(m.cfg.Key) {
		case 16, 24, 32:
		default:
			return nil, fmt.Errorf("membership: gossip key is %d bytes, want 16, 24 or 32", len(m.cfg.Key))
		}
		mc.SecretKey = m.cfg.Key
	}
	mc.Label = m.cfg.Label
	mc.DeadNodeReclaimTime = m.cfg.DeadNodeReclaimTime
	mc.Delegate = delegate{m}
	mc.Events = events{m}
	// Memberlist's own level tags become slog levels (debug when untagged).
	mc.Logger = logbridge.Std(m.cfg.Logger, "memberlist", slog.LevelDebug)
	return mc, nil
}

// LocalMeta is this node's gossip metadata now.
func (m *Membership) LocalMeta() Meta {
	return Meta{Version: metaVersion, ID: m.node.ID(), Name: m.cfg.Name, RaftAddr: m.cfg.RaftAddr, APIAddr: m.cfg.APIAddr,
		Expect: m.cfg.BootstrapExpect, HasState: m.node.HasState()}
}

// member is a gossip member with decoded metadata.
type member struct {
	Meta
	state memberlist.NodeStateType
	addr  string
}

// Members returns every gossip member with valid metadata (this node
// included) in any state: alive, suspect, dead or left.
func (m *Membership) Members() []member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]member, 0, len(m.members))
	for _, mem := range m.members {
		out = append(out, mem)
	}
	return out
}

// observe records a memberlist node. It runs in memberlist's event
// callbacks, under memberlist's lock, so the node's fields are stable.
//
// The state is the caller's: memberlist v0.6.0 keeps a node's state in its
// own record and never updates the Node.State it passes here, so a leave
// (graceful or not) cannot be told from a death; both count as gone.
func (m *Membership) observe(n *memberlist.Node, state memberlist.NodeStateType) {
	meta, ok := decodeMeta(n.Meta)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !ok {
		delete(m.members, n.Name)
		return
	}
	m.members[n.Name] = member{Meta: meta, state: state, addr: n.Address()}
}

// Healthy reports autopilot's verdict on a server (ok is false when
// autopilot has none, e.g. on a follower).
func (m *Membership) Healthy(id string) (healthy, ok bool) {
	healthy, _, ok = m.ServerHealth(id)
	return healthy, ok
}

// ServerHealth is autopilot's view of a server: healthy, and how long
// since it heard from the leader. ok is false off the leader (autopilot
// runs there only) or for an unknown server.
func (m *Membership) ServerHealth(id string) (healthy bool, lastContact time.Duration, ok bool) {
	s := m.ap.GetState()
	if s == nil {
		return false, 0, false
	}
	srv, found := s.Servers[raft.ServerID(id)]
	if !found {
		return false, 0, false
	}
	return srv.Health.Healthy, srv.Stats.LastContact, true
}

// HealthThresholds are autopilot's: how recently a healthy server heard
// from the leader, and how many entries its log may trail the leader's.
// Cluster.Status judges servers by them where autopilot has no verdict.
func (m *Membership) HealthThresholds() (lastContact time.Duration, maxTrailingLogs uint64) {
	return m.cfg.LastContactThreshold, m.cfg.MaxTrailingLogs
}

// MemberName is the name (--node-name) server id gave in its gossip
// metadata, "" when gossip never carried it. A member that left or died
// keeps its name here.
func (m *Membership) MemberName(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.members[id].Name
}

// joinLoop joins the seeds, retrying until one answers, then keeps
// pushing this node's state to them every RejoinInterval (cheap: one
// push/pull), which is what gets a node that moved accepted.
func (m *Membership) joinLoop(ctx context.Context) {
	defer m.wg.Done()
	if len(m.cfg.Join) == 0 {
		return
	}
	joined := false
	for attempt := 0; ; attempt++ {
		wait := m.cfg.RejoinInterval
		n, err := m.ml.Join(m.cfg.Join)
		switch {
		case n > 0 && !joined:
			joined = true
			m.log.Info("joined the gossip pool", "contacted", n)
		case n == 0 && !joined:
			if attempt%10 == 0 {
				m.log.Warn("cannot join yet; retrying", "join", strings.Join(m.cfg.Join, ","), "err", err)
			}
			wait = min(time.Duration(attempt+1)*200*time.Millisecond, 5*time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Leave leaves the cluster gracefully: a leader first hands leadership
// away; the node then announces its departure by gossip (so the leader,
// which adds only live members, does not add it back) and has the leader
// remove it from the Raft configuration, returning once that is
// committed.
func (m *Membership) Leave(ctx context.Context) error {
	if m.node.IsLeader() {
		if err := m.node.TransferLeadership(ctx, ""); err != nil {
			m.log.Warn("leave: leadership transfer", "err", err)
		}
	}
	if err := m.ml.Leave(5 * time.Second); err != nil {
		return fmt.Errorf("membership: leave gossip: %w", err)
	}
	if err := m.node.RemoveServer(ctx, m.node.ID()); err != nil {
		return fmt.Errorf("membership: leave: remove from the Raft configuration: %w", err)
	}
	m.log.Info("left the cluster")
	return nil
}

// Close stops the loops and gossip (without announcing a leave: a node
// that stops like this is later seen as failed).
func (m *Membership) Close() error {
	m.cancel()
	m.wg.Wait()
	<-m.ap.Stop()
	return m.ml.Shutdown()
}

func (m *Membership) trigger() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// delegate implements memberlist.Delegate: metadata only.
type delegate struct{ m *Membership }

func (d delegate) NodeMeta(limit int) []byte {
	b, err := d.m.LocalMeta().encode()
	if err != nil || len(b) > limit {
		d.m.log.Error("node metadata does not fit", "err", err)
		return nil
	}
	return b
}
func (delegate) NotifyMsg([]byte)                           {}
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (delegate) LocalState(join bool) []byte                { return nil }
func (delegate) MergeRemoteState(buf []byte, join bool)     {}

// events implements memberlist.EventDelegate: any change wakes the
// reconcile loop.
type events struct{ m *Membership }

func (e events) NotifyJoin(n *memberlist.Node)  { e.m.observe(n, memberlist.StateAlive); e.m.trigger() }
func (e events) NotifyLeave(n *memberlist.Node) { e.m.observe(n, memberlist.StateDead); e.m.trigger() }
func (e events) NotifyUpdate(n *memberlist.Node) {
	e.m.observe(n, memberlist.StateAlive)
	e.m.trigger()
}
