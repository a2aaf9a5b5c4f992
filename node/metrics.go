package node

import (
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
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
}

func newMetrics() *metrics {
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms .. 16 s
	sizes := []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	return &metrics{
		applyBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "skald", Subsystem: "node", Name: "apply_batch_entries",
			Help:    "Log entries per state machine ApplyBatch call.",
			Buckets: sizes,
		}),
		applyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "skald", Subsystem: "node", Name: "apply_seconds",
			Help: "Time from proposing a command on the leader to its result.", Buckets: buckets,
		}),
		forwardLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "skald", Subsystem: "node", Name: "forward_seconds",
			Help: "Time of writes a follower forwarded to the leader.", Buckets: buckets,
		}),
		forwardBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "skald", Subsystem: "node", Name: "forward_batch_writes",
			Help: "Writes per call a follower made to the leader (concurrent writes share calls).", Buckets: sizes,
		}),
		readIndexBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "skald", Subsystem: "node", Name: "read_index_batch_reads",
			Help: "Linearizable reads served by one read-index confirmation.", Buckets: sizes,
		}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "skald", Subsystem: "node", Name: "expired_messages_total",
			Help: "Messages removed by retention policies through the expiry entries this node proposed as leader.",
		}),
		readWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "skald", Subsystem: "node", Name: "read_wait_seconds",
			Help: "Time reads waited for their consistency level before reading.", Buckets: buckets,
		}),
	}
}

// register adds the metrics and the raft gauges of n to reg.
func (m *metrics) register(reg prometheus.Registerer, n *Node) error {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "skald", Subsystem: "raft", Name: name, Help: help}, f)
	}
	cs := []prometheus.Collector{
		m.applyBatch, m.applyLatency, m.forwardLatency, m.forwardBatch, m.readWait, m.readIndexBatch, m.expired,
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
	)
	cs = append(cs, newGroupCollector(n.groups, n.cfg.MetricsTenantLabels), n.port.refusedCounter())
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
