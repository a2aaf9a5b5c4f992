package kurrentdb

import (
	"net"
	"testing"

	"connectrpc.com/connect"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/prometheus/client_golang/prometheus"
)

// TestMetrics: calls are counted by method and code, refusals before
// the body and unserved methods included.
func TestMetrics(t *testing.T) {
	f := start(t, 1, secureMode)
	reg := prometheus.NewRegistry()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, f.leader.tn, ln, selfSigned(t), Options{Registerer: reg})
	m := &member{tn: f.leader.tn, addr: ln.Addr().String()}
	owner, reader := tlsClient(t, m, "initial", f.owner), tlsClient(t, m, readerName, f.reader)
	appendN(t, owner, "count-1", 2)
	_, err = reader.AppendToStream(ctxT(t), "count-1", kurrentdb.AppendToStreamOptions{}, jsonEvent("A", `{}`))
	if err == nil {
		t.Fatal("a reader appended")
	}
	unserved := connect.NewClient[shared.Empty, shared.Empty](grpcTLS(),
		"https://"+m.addr+"/event_store.client.projections.Projections/RestartSubsystem", connect.WithGRPC())
	if _, err := unserved.CallUnary(ctxT(t), connect.NewRequest(&shared.Empty{})); err == nil {
		t.Fatal("an unserved method answered")
	}
	requests, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	latencies := 0
	for _, mf := range requests {
		if mf.GetName() == "skald_kurrentdb_duration_seconds" {
			latencies = len(mf.GetMetric())
		}
		if mf.GetName() != "skald_kurrentdb_requests_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			var method, code string
			for _, l := range s.GetLabel() {
				switch l.GetName() {
				case "method":
					method = l.GetValue()
				case "code":
					code = l.GetValue()
				}
			}
			got[method+" "+code] = s.GetCounter().GetValue()
		}
	}
	for key, want := range map[string]float64{
		"event_store.client.streams.Streams/Append ok":                             2,
		"event_store.client.streams.Streams/Append permission_denied":              1,
		"event_store.client.server_features.ServerFeatures/GetSupportedMethods ok": 2, // one per client
		unservedMethod + " unimplemented":                                          1,
	} {
		if got[key] != want {
			t.Errorf("requests %q: %v, want %v (all: %v)", key, got[key], want, got)
		}
	}
	if latencies != len(got) {
		t.Errorf("%d latency series, want one per request series (%d)", latencies, len(got))
	}
}
