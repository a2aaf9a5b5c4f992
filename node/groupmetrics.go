package node

import "github.com/prometheus/client_golang/prometheus"

// groupCollector exports the live state of every subscription group this
// node owns (the leader; others export none), labelled by namespace and
// group, read when scraped.
type groupCollector struct {
	o     *groupOwner
	descs map[string]*prometheus.Desc
}

func newGroupCollector(o *groupOwner) *groupCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("skald", "group", name), help, []string{"namespace", "group"}, nil)
	}
	return &groupCollector{o: o, descs: map[string]*prometheus.Desc{
		"consumers":    desc("consumers", "Consumers attached to the group."),
		"in_flight":    desc("in_flight", "Messages delivered and not yet settled."),
		"lag":          desc("lag_messages", "Messages of the namespace at or after the group's read position, plus those it holds unsettled (an upper bound of the group's backlog)."),
		"redeliveries": desc("redeliveries_total", "Deliveries of a message after its first, since this node began owning the group."),
		"acked":        desc("acked_total", "Messages acknowledged or skipped, since this node began owning the group."),
		"parked":       desc("parked_total", "Messages parked, since this node began owning the group."),
	}}
}

func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	c.o.mu.Lock()
	ds := make([]*dispatcher, 0, len(c.o.active))
	for _, d := range c.o.active {
		ds = append(ds, d)
	}
	c.o.mu.Unlock()
	for _, d := range ds {
		st := d.state()
		for name, v := range map[string]float64{"consumers": float64(st.Consumers), "in_flight": float64(st.InFlight), "lag": float64(st.Lag)} {
			ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v, d.ns, d.name)
		}
		for name, v := range map[string]float64{"redeliveries": float64(st.Redeliveries), "acked": float64(st.Acked), "parked": float64(st.Parked)} {
			ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, v, d.ns, d.name)
		}
	}
}
