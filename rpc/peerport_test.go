package rpc

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The node-to-node peer service is on the cluster port only (mutual TLS):
// the API port answers its procedures as unknown (UNIMPLEMENTED), whatever the caller
// sends, so a namespace token or a guessed secret header reaches nothing.
func TestAPIPortHasNoPeerService(t *testing.T) {
	t.Parallel()
	s := single(t)
	for _, proc := range []string{"Apply", "ApplyBatch", "ReadIndex", "Stats", "RemoveServer", "GroupSettle"} {
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+s.addr+"/skald.peer.v1.PeerService/"+proc, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Skald-Cluster-Secret", "anything")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), `"unimplemented"`) {
			t.Errorf("POST PeerService/%s on the API port: %s %s, want 501 unimplemented (an unknown procedure)", proc, resp.Status, body)
		}
	}
}
