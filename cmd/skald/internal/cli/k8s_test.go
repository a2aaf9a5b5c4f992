package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestStatefulSetOrdinal(t *testing.T) {
	cases := []struct {
		pod     string
		set     string
		ordinal int
		ok      bool
	}{
		{"skald-0", "skald", 0, true},
		{"my-skald-12", "my-skald", 12, true},
		{"skald", "", 0, false},
		{"skald-x", "", 0, false},
		{"-1", "", 0, false},
	}
	for _, tc := range cases {
		set, n, err := statefulSetOrdinal(tc.pod)
		if (err == nil) != tc.ok || set != tc.set || n != tc.ordinal {
			t.Errorf("statefulSetOrdinal(%q) = %q, %d, %v", tc.pod, set, n, err)
		}
	}
}

// TestScaledDown serves a StatefulSet the way the Kubernetes API does (the
// API server itself cannot run here) and checks the decision per pod.
func TestScaledDown(t *testing.T) {
	var gotAuth, gotPath string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.Path
		if r.URL.Path != "/apis/apps/v1/namespaces/prod/statefulsets/skald" {
			http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
			return
		}
		w.Write([]byte(`{"kind":"StatefulSet","spec":{"replicas":3,"serviceName":"skald-peers"}}`))
	}))
	defer srv.Close()
	api := kubeAPI{base: srv.URL, token: "sa-token", namespace: "prod", client: srv.Client()}
	cases := []struct {
		pod     string
		down    bool
		wantErr bool
	}{
		{"skald-0", false, false},
		{"skald-2", false, false},
		{"skald-3", true, false},
		{"skald-4", true, false},
		{"other-1", false, true},
	}
	for _, tc := range cases {
		down, why, err := api.scaledDown(context.Background(), tc.pod)
		if (err != nil) != tc.wantErr || down != tc.down {
			t.Errorf("%s: down=%v (%s) err=%v; want down=%v err=%v", tc.pod, down, why, err, tc.down, tc.wantErr)
		}
	}
	if gotAuth != "Bearer sa-token" || gotPath != "/apis/apps/v1/namespaces/prod/statefulsets/other" {
		t.Fatalf("last request: auth %q path %q", gotAuth, gotPath)
	}
	if _, err := inClusterAPI(t.TempDir()); err == nil {
		t.Fatal("inClusterAPI outside Kubernetes: no error")
	}
}
