package node

import (
	"io/fs"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node/delivery"
)

// metrics are the node's Prometheus metrics (namespace skald, subsystem
// node). The raft gauges read the live node when scraped.
type metrics struct {
	applyBatch     prometheus.Histogram
	applyLatency   prometheus.Histogram
	forwardLatency prometheus.Histogram
	forwardBatch   prometheus.Histogram
	readWait       prometheus.Histogram
	readIndexBatch prometheus.Histogram
	expired        prometheus.Counter

	// What on-call engineers alert on (deploy/prometheus/alerts.yaml).
	leaderChanges prometheus.Counter
	refused       *prometheus.CounterVec // by reason
	logSync       prometheus.Histogram
	snapshot      prometheus.Histogram
	snapshots     *prometheus.CounterVec // by kind: local, sent, received
	snapshotBytes *prometheus.CounterVec // by direction: sent, received
}

// Reasons a write is refused before it is proposed
// (skald_node_proposals_refused_total).
const (
	refusedNoLeader  = "no_leader"  // no leader within Config.LeaderWait
	refusedDiskFull  = "disk_full"  // a voter is under --min-free-disk
	refusedVersion   = "version"    // a server does not know the command (checkVersion)
	refusedDiskSpace = "disk_space" // a namespace create, a voter under its reserve
)

func newMetrics() *metrics {
	m := newMetricsUnset()
	// Every label value exported from the start, so an alert on a
	// rate sees the first refusal or transfer.
	for _, r := range []string{refusedNoLeader, refusedDiskFull, refusedDiskSpace, refusedVersion} {
		m.refused.WithLabelValues(r)
	}
	for _, k := range []string{"local", "sent", "received"} {
		m.snapshots.WithLabelValues(k)
	}
	for _, d := range []string{"sent", "received"} {
		m.snapshotBytes.WithLabelValues(d)
	}
	return m
}

func newMetricsUnset() *metrics {
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms .. 16 s
	histogram := func(name string, buckets []float64, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "skald", Subsystem: "node", Name: name, Help: help, Buckets: buckets})
	}
	sizes := []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	return &metrics{
		applyBatch: histogram("apply_batch_entries", sizes,
			"Log entries per state machine ApplyBatch call."),
		applyLatency: histogram("apply_seconds", buckets,
			"Time from proposing a command on the leader to its result."),
		forwardLatency: histogram("forward_seconds", buckets,
			"Time of writes a follower forwarded to the leader."),
		forwardBatch: histogram("forward_batch_writes", sizes,
			"Writes per call a follower made to the leader (concurrent writes share calls)."),
		readIndexBatch: histogram("read_index_batch_reads", sizes,
			"Linearizable reads served by one read-index confirmation."),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "node", Name: "expired_messages_total",
			Help: "Messages removed by retention policies through the expiry entries this node proposed as leader.",
		}),
		readWait: histogram("read_wait_seconds", buckets,
			"Time reads waited for their consistency level before reading."),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "raft", Name: "leader_changes_total",
			Help: "Changes of the leader this node observed (a leader lost counts, as does a new one).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "node", Name: "proposals_refused_total",
			Help: "Writes refused before they were proposed, by reason: no_leader (none within --leader-wait), " +
				"disk_full (a voter under --min-free-disk), disk_space (a namespace create, a voter under its reserve).",
		}, []string{"reason"}),
		logSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "skald", Subsystem: "raft", Name: "log_sync_seconds",
			Help: "Time of each fsync (fdatasync) of the Raft log (raft-wal segments).", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		snapshot: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "skald", Subsystem: "raft", Name: "snapshot_seconds",
			Help: "Time of each local snapshot (the state machine made durable so Raft may compact its log).", Buckets: buckets,
		}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "raft", Name: "snapshots_total",
			Help: "Snapshots by kind: local (log compaction), sent (a checkpoint streamed to a follower), received (installed from the leader).",
		}, []string{"kind"}),
		snapshotBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "raft", Name: "snapshot_transfer_bytes_total",
			Help: "Bytes of snapshots streamed to followers (sent) or from the leader (received).",
		}, []string{"direction"}),
	}
}

// observeLogSync is walFS's hook: one fsync of the Raft log took d.
func (m *metrics) observeLogSync(d time.Duration) { m.logSync.Observe(d.Seconds()) }

// register adds the metrics and the raft gauges of n to reg.
func (m *metrics) register(reg prometheus.Registerer, n *Node) error {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "skald", Subsystem: "raft", Name: name, Help: help}, f)
	}
	cs := []prometheus.Collector{
		m.applyBatch, m.applyLatency, m.forwardLatency, m.forwardBatch, m.readWait, m.readIndexBatch, m.expired,
		m.leaderChanges, m.refused, m.logSync, m.snapshot, m.snapshots, m.snapshotBytes,
		gauge("has_leader", "1 while this node knows a leader, 0 while there is none (an election, or no quorum).", func() float64 {
			if addr, _ := n.raft.LeaderWithID(); addr != "" {
				return 1
			}
			return 0
		}),
		gauge("last_log_index", "Index of the last entry in this node's Raft log.", func() float64 { return float64(n.raft.LastIndex()) }),
		gauge("log_bytes", "Bytes of this node's Raft log files on disk (raft-wal preallocates each segment whole; 0 in memory).", func() float64 { return float64(n.raftLogBytes()) }),
		gauge("state", "Raft state: 0 follower, 1 candidate, 2 leader, 3 shutdown.", func() float64 { return float64(n.raft.State()) }),
		gauge("term", "Current Raft term.", func() float64 { return float64(n.raft.CurrentTerm()) }),
		gauge("commit_index", "Raft commit index.", func() float64 { return float64(n.raft.CommitIndex()) }),
		gauge("applied_index", "Index the state machine has applied.", func() float64 { return float64(n.sm.appliedIndex()) }),
		gauge("last_contact_seconds", "Seconds since the leader was last heard from (0 on the leader).", func() float64 {
			if n.raft.State() == raft.Leader {
				return 0
			}
			lc := n.raft.LastContact()
			if lc.IsZero() {
				return -1
			}
			return time.Since(lc).Seconds()
		}),
	}
	storage := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "skald", Subsystem: "node", Name: name, Help: help}, f)
	}
	cs = append(cs,
		storage("storage_stalled", "1 while the state machine waits for a resource it ran out of (file descriptors, disk space): "+
			"it applies nothing meanwhile, /readyz answers 503, and it resumes by itself once the resource is free.", func() float64 {
			if _, ok := n.store.Stall(); ok {
				return 1
			}
			return 0
		}),
		storage("storage_stall_seconds", "How long the current storage stall has lasted; 0 when there is none.", func() float64 {
			if st, ok := n.store.Stall(); ok {
				return time.Since(st.Since).Seconds()
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "skald", Subsystem: "node", Name: "storage_stalls_total",
			Help: "Storage stalls (waits for file descriptors or disk space) begun since the node started."},
			func() float64 { return float64(n.store.Stalls()) }),
		storage("disk_free_bytes", "Bytes unprivileged writers may still use on the file system of the data directory (-1 in memory or unknown).", func() float64 {
			if free, ok := n.localFreeDisk(); ok {
				return float64(free)
			}
			return -1
		}),
		newStorageCollector(n.store),
	)
	cs = append(cs, delivery.NewCollector(n.groups, n.cfg.MetricsTenantLabels), newIndexCollector(n, n.cfg.MetricsTenantLabels), n.port.RefusedCounter())
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// storageCollector exports the open namespaces' storage, read once per
// scrape (fsm.Store.StorageStats), and what Pebble's event listener
// counted over every database. Sums over namespaces: a per-namespace
// series would name tenants (see --metrics-tenant-labels).
type storageCollector struct {
	store *fsm.Store
	descs map[string]*prometheus.Desc
}

// storageSeries are the collector's series: name, help, and whether it is
// a counter.
var storageSeries = []struct {
	name, help string
	counter    bool
	value      func(fsm.StorageStats) float64
}{
	{"skald_node_open_namespaces", "Namespace databases open on this node (at most --max-open-namespaces; the rest open on use).", false,
		func(st fsm.StorageStats) float64 { return float64(st.OpenNamespaces) }},
	{"skald_node_pebble_bytes", "Bytes the open namespace databases hold on disk (sstables, WAL, manifest).", false,
		func(st fsm.StorageStats) float64 { return float64(st.DiskBytes) }},
	{"skald_node_compaction_debt_bytes", "Bytes compactions must still rewrite in the open namespace databases (Pebble's estimate); growing without bound means the disk cannot keep up.", false,
		func(st fsm.StorageStats) float64 { return float64(st.CompactionDebtBytes) }},
	{"skald_node_pebble_l0_files", "Level-0 tables of the open namespace databases; a backlog here precedes write stalls.", false,
		func(st fsm.StorageStats) float64 { return float64(st.L0Files) }},
	{"skald_node_pebble_l0_sublevels_max", "The most level-0 sublevels one open database has; Pebble stalls its writes at 12.", false,
		func(st fsm.StorageStats) float64 { return float64(st.L0SublevelsMax) }},
	{"skald_node_pebble_write_stalls_total", "Write stalls of this node's databases: writes waited for a memtable flush or level-0 compaction (each is logged).", true,
		func(st fsm.StorageStats) float64 { return float64(st.Events.WriteStalls) }},
	{"skald_node_pebble_write_stall_seconds_total", "Time writes to this node's databases spent stalled.", true,
		func(st fsm.StorageStats) float64 { return st.Events.WriteStallTime.Seconds() }},
	{"skald_node_pebble_flushes_total", "Memtable flushes of this node's databases.", true,
		func(st fsm.StorageStats) float64 { return float64(st.Events.Flushes) }},
	{"skald_node_pebble_flush_bytes_total", "Bytes written by memtable flushes.", true,
		func(st fsm.StorageStats) float64 { return float64(st.Events.FlushBytes) }},
	{"skald_node_pebble_compactions_total", "Compactions of this node's databases.", true,
		func(st fsm.StorageStats) float64 { return float64(st.Events.Compactions) }},
	{"skald_node_pebble_compaction_bytes_total", "Bytes written by compactions.", true,
		func(st fsm.StorageStats) float64 { return float64(st.Events.CompactionBytes) }},
	{"skald_node_pebble_disk_slow_total", "Disk operations of this node's databases Pebble saw take too long (each is logged).", true,
		func(st fsm.StorageStats) float64 { return float64(st.Events.DiskSlow) }},
	{"skald_node_pebble_background_errors_total", "Errors of Pebble's background work (flushes, compactions; each is logged).", true,
		func(st fsm.StorageStats) float64 { return float64(st.Events.BackgroundErrors) }},
}

func newStorageCollector(store *fsm.Store) storageCollector {
	c := storageCollector{store: store, descs: make(map[string]*prometheus.Desc, len(storageSeries))}
	for _, s := range storageSeries {
		c.descs[s.name] = prometheus.NewDesc(s.name, s.help, nil, nil)
	}
	return c
}

func (c storageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range storageSeries {
		ch <- c.descs[s.name]
	}
}

func (c storageCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.StorageStats()
	for _, s := range storageSeries {
		kind := prometheus.GaugeValue
		if s.counter {
			kind = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[s.name], kind, s.value(st))
	}
}

// watchLeader counts the leader changes this node observes (Raft's leader
// observations; a burst beyond the channel's room is dropped, so under a
// storm of elections the counter may run low, never high).
func (n *Node) watchLeader() {
	defer n.wg.Done()
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	var last raft.ServerID
	for {
		select {
		case <-n.closing:
			return
		case o := <-ch:
			if lo := o.Data.(raft.LeaderObservation); lo.LeaderID != last {
				last = lo.LeaderID
				n.m.leaderChanges.Inc()
			}
		}
	}
}

// raftLogBytes is the size of the Raft log's files (0 in memory or when
// they cannot be listed). Snapshot transfers in progress are not counted.
func (n *Node) raftLogBytes() int64 {
	if n.cfg.InMemory {
		return 0
	}
	dir := filepath.Join(n.cfg.DataDir, "raft")
	var total int64
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone while listed: not counted
		}
		if d.IsDir() && d.Name() == "snapshots" && filepath.Dir(path) == dir {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}
