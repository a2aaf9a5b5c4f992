package rpc

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// tenantLabels are the metric labels that name a tenant. A series that
// carries one is served on the API port to the admin token only: any
// client, and anyone who can reach the port, may scrape /metrics, and
// namespace and group names are the tenants' own data.
var tenantLabels = map[string]bool{"namespace": true, "group": true}

// metricsHandler serves GET /metrics on the API port in the Prometheus
// text format. A request without an Authorization header gets every series
// except those with a tenant label; one with the admin token gets them
// all; any other token is refused (401, or 403 for a namespace token), so
// a scraper configured with the wrong token fails loudly instead of
// silently missing series. Which series name tenants at all is the node's
// choice (node.Config.MetricsTenantLabels, off by default).
func metricsHandler(auth authenticator, g prometheus.Gatherer) http.Handler {
	all := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	public := promhttp.HandlerFor(withoutTenants{g}, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			public.ServeHTTP(w, r)
			return
		}
		ctx, err := auth.authenticate(r.Context(), r.Header)
		if err != nil {
			http.Error(w, "/metrics: the token is not valid; send the admin token, or no Authorization header for the series that name no namespace or group", http.StatusUnauthorized)
			return
		}
		if !callerFrom(ctx).admin {
			http.Error(w, "/metrics: a namespace token may not read metrics; send the admin token, or no Authorization header for the series that name no namespace or group", http.StatusForbidden)
			return
		}
		all.ServeHTTP(w, r.WithContext(ctx))
	})
}

// withoutTenants gathers g and drops every series with a tenant label
// (families left empty go too).
type withoutTenants struct{ g prometheus.Gatherer }

func (w withoutTenants) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := w.g.Gather()
	out := mfs[:0]
	for _, mf := range mfs {
		kept := mf.Metric[:0]
		for _, m := range mf.Metric {
			if !namesTenant(m) {
				kept = append(kept, m)
			}
		}
		if len(kept) > 0 {
			mf.Metric = kept
			out = append(out, mf)
		}
	}
	return out, err
}

func namesTenant(m *dto.Metric) bool {
	for _, l := range m.GetLabel() {
		if tenantLabels[l.GetName()] {
			return true
		}
	}
	return false
}
