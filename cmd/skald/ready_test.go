package main

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"testing"

	"github.com/skalddb/skald/internal/testutil"
)

// TestReadyMeansAdminTokenWorks starts fresh servers again and again and
// calls with the admin token the moment /readyz first answers 200: ready
// must mean the bootstrap namespace and its token are applied and
// readable, on a plain single node and on a one-node cluster formed by
// bootstrap-expect.
func TestReadyMeansAdminTokenWorks(t *testing.T) {
	t.Parallel()
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	for i := range 10 {
		clustered := i%2 == 1
		p := launch(t, t.TempDir(), func(httpAddr, raftAddr string) []string {
			args := []string{"--http-addr", httpAddr, "--raft-addr", raftAddr, "--log-level", "warn", "--admin-token", testAdmin}
			if clustered {
				args = append(args, "--bootstrap-expect", "1", "--gossip-addr", testutil.FreeAddr(t), "--gossip-key", key)
			}
			return args
		}, func(p *serverProc) bool {
			resp, err := http.Get("http://" + p.addr + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		req, err := http.NewRequest(http.MethodPost, "http://"+p.addr+"/rpc", bytes.NewReader([]byte(`["ns.list"]`)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testAdmin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("start %d (clustered %v): first admin call after /readyz: %d %s", i, clustered, resp.StatusCode, body)
		}
		p.cmd.Process.Kill() // launch's cleanup waits for it
	}
}
