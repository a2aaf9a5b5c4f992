package delivery

import "github.com/prometheus/client_golang/prometheus"

// Collector exports the live state of every subscription group this
// node owns (the leader; others export none), read when scraped. With
// tenantLabels each series is labelled by namespace and group; without
// (the default), each is summed over the groups, with no label, so the
// metrics name no tenant.
//
// INVARIANT: a series that names a tenant carries the label "namespace"
// or "group": rpc hides every such series from callers without the admin
// token on the API port, whatever the setting.
type Collector struct {
	o            *Owner
	tenantLabels bool
	descs        map[string]*prometheus.Desc
}

// NewCollector returns the collector of o's groups, each series labelled
// by namespace and group when tenantLabels is set.
func NewCollector(o *Owner, tenantLabels bool) *Collector {
	var labels []string
	per := "summed over the groups this node owns"
	if tenantLabels {
		labels, per = []string{"namespace", "group"}, "per group"
	}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("skald", "group", name), help+" ("+per+").", labels, nil)
	}
	return &Collector{o: o, tenantLabels: tenantLabels, descs: map[string]*prometheus.Desc{
		"consumers": desc("consumers", "Consumers attached to subscription groups"),
		"in_flight": desc("in_flight", "Messages delivered and not yet settled"),
		"lag": desc("lag_messages", "Messages of the namespace at or after a group's read position, "+
			"plus those it holds unsettled (an upper bound of the backlog)"),
		"redeliveries": desc("redeliveries_total",
			"Deliveries of a message after its first, since this node began owning the group"),
		"acked":  desc("acked_total", "Messages acknowledged or skipped, since this node began owning the group"),
		"parked": desc("parked_total", "Messages parked, since this node began owning the group"),
	}}
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// groupGauges and groupCounters name the descs of each kind.
var (
	groupGauges   = []string{"consumers", "in_flight", "lag"}
	groupCounters = []string{"redeliveries", "acked", "parked"}
)

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.o.mu.Lock()
	ds := make([]*dispatcher, 0, len(c.o.active))
	for _, d := range c.o.active {
		ds = append(ds, d)
	}
	c.o.mu.Unlock()
	sum := map[string]float64{}
	for _, d := range ds {
		st := d.state()
		v := map[string]float64{
			"consumers": float64(st.Consumers), "in_flight": float64(st.InFlight), "lag": float64(st.Lag),
			"redeliveries": float64(st.Redeliveries), "acked": float64(st.Acked), "parked": float64(st.Parked),
		}
		if !c.tenantLabels {
			for name, x := range v {
				sum[name] += x
			}
			continue
		}
		for _, name := range groupGauges {
			ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v[name], d.ns, d.name)
		}
		for _, name := range groupCounters {
			ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, v[name], d.ns, d.name)
		}
	}
	if c.tenantLabels {
		return
	}
	// Summed, the series exist even with no group: a dashboard's query
	// finds 0 rather than nothing. A counter drops when a group stops
	// being owned here, which Prometheus treats as a reset.
	for _, name := range groupGauges {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, sum[name])
	}
	for _, name := range groupCounters {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, sum[name])
	}
}
