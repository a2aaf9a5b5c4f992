package kurrentdb

import (
	"crypto/tls"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/serverfeatures"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
)

// grpcTLS is an HTTP client for the gRPC protocol over TLS, the test's
// certificate not verified.
func grpcTLS() *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	return &http.Client{Transport: tr}
}

// TestFeaturesAnonymous: ServerFeatures lists exactly the served
// methods, in lower case, to a caller without credentials even where
// every other call needs them.
func TestFeaturesAnonymous(t *testing.T) {
	f := start(t, 1, secureMode)
	cl := connect.NewClient[shared.Empty, serverfeatures.SupportedMethods](grpcTLS(),
		"https://"+f.leader.addr+featuresProcedure, connect.WithGRPC())
	resp, err := cl.CallUnary(ctxT(t), connect.NewRequest(&shared.Empty{}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range resp.Msg.GetMethods() {
		got = append(got, m.GetServiceName()+"/"+m.GetMethodName()+"["+strings.Join(m.GetFeatures(), ",")+"]")
	}
	want := []string{
		"event_store.client.streams.streams/read[position,events]",
		"event_store.client.streams.streams/append[]",
		"event_store.client.streams.streams/delete[]",
		"event_store.client.streams.streams/tombstone[]",
		"event_store.client.persistent_subscriptions.persistentsubscriptions/create[stream,all]",
		"event_store.client.persistent_subscriptions.persistentsubscriptions/update[stream,all]",
		"event_store.client.persistent_subscriptions.persistentsubscriptions/delete[stream,all]",
		"event_store.client.persistent_subscriptions.persistentsubscriptions/read[stream,all]",
		"event_store.client.persistent_subscriptions.persistentsubscriptions/getinfo[stream,all]",
		"event_store.client.persistent_subscriptions.persistentsubscriptions/replayparked[stream,all]",
		"event_store.client.persistent_subscriptions.persistentsubscriptions/list[stream,all]",
		"event_store.client.persistent_subscriptions.persistentsubscriptions/restartsubsystem[stream,all]",
		"event_store.client.server_features.serverfeatures/getsupportedmethods[]",
		"event_store.client.gossip.gossip/read[]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("supported methods %v, want %v", got, want)
	}
	if v := resp.Msg.GetEventStoreServerVersion(); v != serverVersion {
		t.Errorf("version %q, want %q", v, serverVersion)
	}
}

// TestUnservedMethods: what is not served answers Unimplemented, which
// the client reports as an unsupported feature, and changes nothing.
func TestUnservedMethods(t *testing.T) {
	f := start(t, 1, insecureMode)
	cl := insecureClient(t, f.leader)
	appendN(t, cl, "keep-1", 1)
	raw := connect.NewClient[shared.Empty, shared.Empty](h2cClient(),
		"http://"+f.leader.addr+"/event_store.client.projections.Projections/RestartSubsystem", connect.WithGRPC())
	_, err := raw.CallUnary(ctxT(t), connect.NewRequest(&shared.Empty{}))
	if connect.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), "Projections/RestartSubsystem") {
		t.Errorf("projections: %v, want Unimplemented naming the method", err)
	}
	evs, err := readStream(t, cl, "keep-1", kurrentdb.ReadStreamOptions{}, 10)
	if err != nil || len(evs) != 1 {
		t.Errorf("after the refused calls the stream holds %d events (%v), want 1", len(evs), err)
	}
}
