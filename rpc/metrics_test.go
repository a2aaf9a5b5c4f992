package rpc

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node"
)

// scrape GETs /metrics from s with token ("" sends no Authorization).
func scrape(t *testing.T, s *server, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, "http://"+s.addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestMetricsNameNoTenant: /metrics on the API port names no namespace or
// group unless the node labels them (Config.MetricsTenantLabels), and even
// then only to the admin token; other tokens are refused. It used to name
// every namespace and group that had a consumer, to anyone.
func TestMetricsNameNoTenant(t *testing.T) {
	t.Parallel()
	const ns, group = "acme-secret-tenant", "payroll-secret-group"
	secrets := regexp.MustCompile(ns + "|" + group)
	cases := []struct {
		name         string
		tenantLabels bool
		anonymous    string // a line the anonymous scrape must hold ("" none)
		admin        string // a line the admin scrape must hold
		anonGroups   bool   // whether the anonymous scrape has skald_group_* series
	}{
		{"default: summed", false, "skald_group_consumers 1", "skald_group_consumers 1", true},
		{"tenant labels: admin only", true, "", `skald_group_consumers{group="` + group + `",namespace="` + ns + `"} 1`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := node.StartTestCluster(t, 1, node.TestClusterOptions{
				Config: func(_ int, cfg *node.Config) { cfg.MetricsTenantLabels = tc.tenantLabels },
				Handler: func(tn *node.TestNode) http.Handler {
					o := defaultOptions
					o.Registerer, o.Gatherer = tn.Registry, tn.Registry
					return NewHandler(tn.Node, o)
				},
			})
			s := &server{n: c.Nodes[0].Node, addr: c.Nodes[0].Addr}
			createAdmin(t, s.n)
			created, err := newClients(s, protocols[0], adminToken).namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: ns}))
			if err != nil {
				t.Fatal(err)
			}
			tenant := newClients(s, protocols[0], created.Msg.Token)
			createGroup(t, tenant, &skaldv1.CreateGroupRequest{Name: group, Source: &skaldv1.CreateGroupRequest_All{All: true}})
			startConsumer(t, tenant, group, "c1")

			var admin string
			testutil.Until(t, waitTimeout, "the consumer in the admin's scrape", func() (bool, string) {
				var code int
				code, admin = scrape(t, s, adminToken)
				return code == http.StatusOK && strings.Contains(admin, "\n"+tc.admin+"\n"), admin
			})
			code, anon := scrape(t, s, "")
			if code != http.StatusOK {
				t.Fatalf("anonymous scrape: %d %s", code, anon)
			}
			if m := secrets.FindString(anon); m != "" {
				t.Errorf("the anonymous scrape names %q", m)
			}
			if !tc.tenantLabels {
				if m := secrets.FindString(admin); m != "" {
					t.Errorf("without tenant labels the admin's scrape names %q", m)
				}
			}
			if tc.anonymous != "" && !strings.Contains(anon, "\n"+tc.anonymous+"\n") {
				t.Errorf("the anonymous scrape lacks %q", tc.anonymous)
			}
			if got := strings.Contains(anon, "\nskald_group_"); got != tc.anonGroups {
				t.Errorf("anonymous scrape has skald_group_* series: %v, want %v", got, tc.anonGroups)
			}
			// The series that name no tenant stay for every scraper.
			for _, line := range []string{"skald_raft_term ", `skald_rpc_requests_total{code="ok",procedure="/skald.v1.Namespaces/Create"} 1`} {
				if !strings.Contains(anon, "\n"+line) {
					t.Errorf("the anonymous scrape lacks %q", line)
				}
			}

			refused := []struct {
				what  string
				token string
				code  int
			}{
				{"a namespace token", created.Msg.Token, http.StatusForbidden},
				{"a malformed token", "nope", http.StatusUnauthorized},
				{"an unknown admin-shaped token", "ns_ZGVmYXVsdA_" + strings.Repeat("1", 64), http.StatusUnauthorized},
			}
			for _, r := range refused {
				code, body := scrape(t, s, r.token)
				if code != r.code || secrets.MatchString(body) || !strings.Contains(body, "send the admin token, or no Authorization header") {
					t.Errorf("%s: %d %q, want %d and no tenant", r.what, code, body, r.code)
				}
			}
		})
	}
}

// TestMetricsFilterKeepsUnlabelled: withoutTenants drops exactly the
// series with a namespace or group label, and the families left empty.
func TestMetricsFilterKeepsUnlabelled(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	plain := prometheus.NewGauge(prometheus.GaugeOpts{Name: "plain"})
	byProc := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "by_procedure"}, []string{"procedure"})
	byNS := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "by_namespace"}, []string{"namespace"})
	byGroup := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "by_group"}, []string{"kind", "group"})
	reg.MustRegister(plain, byProc, byNS, byGroup)
	byProc.WithLabelValues("/a").Inc()
	byNS.WithLabelValues("acme").Inc()
	byGroup.WithLabelValues("x", "payroll").Set(1)
	mfs, err := withoutTenants{reg}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got = append(got, fmt.Sprintf("%s{%s}", mf.GetName(), strings.Join(labels, ",")))
		}
	}
	want := []string{"by_procedure{procedure=/a}", "plain{}"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("kept %q, want %q", got, want)
	}
}
