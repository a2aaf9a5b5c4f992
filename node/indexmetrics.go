package node

import (
	"github.com/prometheus/client_golang/prometheus"
)

// indexCollector exports this node's progress on every user-defined index
// (node/index.go), read from the namespaces' databases when scraped. With
// tenantLabels each series is labelled by namespace and index; without
// (the default) each is summed over the indexes, with no label, so the
// metrics name no tenant (as delivery.Collector; rpc hides a series carrying
// "namespace" from callers without the admin token).
type indexCollector struct {
	n            *Node
	tenantLabels bool
	descs        map[string]*prometheus.Desc
	read         *prometheus.Desc
	failures     *prometheus.Desc
	tooLarge     *prometheus.Desc
}

func newIndexCollector(n *Node, tenantLabels bool) *indexCollector {
	var labels []string
	per := "summed over the indexes of this node"
	if tenantLabels {
		labels, per = []string{"namespace", "index"}, "per index"
	}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("skald", "index", name), help+" ("+per+").", labels, nil)
	}
	return &indexCollector{n: n, tenantLabels: tenantLabels, descs: map[string]*prometheus.Desc{
		"indexes":  desc("count", "User-defined indexes"),
		"building": desc("building", "Indexes still building: no round reached the end of their namespace yet"),
		"paused":   desc("paused", "Indexes paused (Indexes.Pause): 1 when paused"),
		"failed":   desc("failed", "Indexes this node stopped maintaining after an error confined to them (Indexes.Info says why): 1 when failed"),
		"lag":      desc("lag_events", "Events of the namespace this node's index does not hold yet"),
		"lag_sec":  desc("lag_seconds", "Age of the oldest event this node's index does not hold yet (the largest, when summed)"),
		"entries":  desc("entries", "Entries of the index on this node"),
		"memory":   desc("memory_bytes", "Bytes of the memory store holding a memory-mode index (its namespace's; counted once per namespace when summed)"),
		"skipped":  desc("skipped_events", "Matching events skipped for a missing or mistyped field"),
		"progress": desc("build_progress", "Share of the namespace an index has read, 0 to 1 (the least, when summed)"),
		"rebuild":  desc("rebuild_progress", "Share of the namespace a rebuild of an index has read, 0 to 1; 1 when none runs (the least, when summed)"),
	}, read: prometheus.NewDesc("skald_index_events_read_total", "Events the index loops of this node read since it started.", nil, nil),
		failures: prometheus.NewDesc("skald_index_failures_total", "Indexes this node's loops failed since it started (an error confined to one index).", nil, nil),
		tooLarge: prometheus.NewDesc("skald_index_values_too_large_total",
			"Matching events this node's index loops did not index since it started because a string field's value "+
				"was longer than 1024 bytes (also counted in skald_index_skipped_events).", nil, nil)}
}

func (c *indexCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.read
	ch <- c.failures
	ch <- c.tooLarge
}

func (c *indexCollector) Collect(ch chan<- prometheus.Metric) {
	counters := c.n.store.IndexCounters()
	ch <- prometheus.MustNewConstMetric(c.read, prometheus.CounterValue, float64(counters.Read))
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(counters.Failures))
	ch <- prometheus.MustNewConstMetric(c.tooLarge, prometheus.CounterValue, float64(counters.TooLarge))
	sum := map[string]float64{"progress": 1, "rebuild": 1}
	for _, ns := range c.n.store.IndexedNamespaces() {
		v, err := c.n.store.View(ns)
		if err != nil {
			continue
		}
		infos, err := v.Indexes()
		v.Close()
		if err != nil {
			continue
		}
		nsMemory := 0.0 // one store per namespace: summed once
		for _, info := range infos {
			building, paused, failed := 0.0, 0.0, 0.0
			if !info.Built {
				building = 1
			}
			if info.Paused {
				paused = 1
			}
			if info.Failure != "" {
				failed = 1
			}
			vals := map[string]float64{
				"indexes": 1, "building": building, "paused": paused, "failed": failed, "lag": float64(info.LagEvents), "lag_sec": info.LagTime.Seconds(),
				"memory": float64(info.MemoryBytes), "entries": float64(info.Entries), "skipped": float64(info.Skipped), "progress": info.Progress, "rebuild": 1,
			}
			if r := info.Rebuilding; r != nil {
				vals["rebuild"] = r.Progress
			}
			if c.tenantLabels {
				for name, x := range vals {
					ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, x, ns, info.Definition.Name)
				}
				continue
			}
			for name, x := range vals {
				switch name {
				case "lag_sec":
					sum[name] = max(sum[name], x)
				case "progress", "rebuild":
					sum[name] = min(sum[name], x)
				case "memory":
					nsMemory = max(nsMemory, x)
				default:
					sum[name] += x
				}
			}
		}
		sum["memory"] += nsMemory
	}
	if c.tenantLabels {
		return
	}
	// Summed, the series exist with no index: a dashboard finds 0.
	for name, d := range c.descs {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, sum[name])
	}
}
