package node

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// TestRecoverFromPeersFile: a 3-node cluster loses two nodes for good; the
// survivor, restarted with a peers file naming only itself, leads a
// one-node cluster holding every acknowledged write, accepts new ones and
// keeps them across another restart.
func TestRecoverFromPeersFile(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	createNamespace(t, l.Node, "ns")
	for i := range 50 {
		if _, err := appendOne(ctxT(t), l.Node, "ns", fmt.Sprintf("s-%d", i%5), fmt.Sprintf("00000000-0000-4000-8000-%012d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged()
	survivor := c.Followers()[0]
	for _, tn := range c.Nodes {
		tn.Kill()
	}

	peers := filepath.Join(survivor.Dir, "raft", PeersFile)
	// A file that leaves the node out is refused and changes nothing.
	os.WriteFile(peers, []byte(`[{"id":"someone-else","address":"127.0.0.1:1","non_voter":false}]`), 0o644)
	if n, err := Open(survivor.config(false)); err == nil {
		n.Close()
		t.Fatal("recovery without this node: no error")
	}
	os.WriteFile(peers, []byte(fmt.Sprintf(`[{"id":%q,"address":%q,"non_voter":false}]`, idOf(t, survivor.Dir), survivor.Proxy.Addr())), 0o644)

	survivor.Restart()
	testutil.Eventually(t, waitTimeout, "the survivor to lead alone", survivor.IsLeader)
	if _, err := os.Stat(peers); !os.IsNotExist(err) {
		t.Fatalf("peers file still there after recovery: %v", err)
	}
	if _, err := os.Stat(peers + ".applied"); err != nil {
		t.Fatalf("peers file not renamed: %v", err)
	}
	cfg := survivor.raft.GetConfiguration()
	if err := cfg.Error(); err != nil || len(cfg.Configuration().Servers) != 1 {
		t.Fatalf("configuration after recovery: %+v, %v", cfg.Configuration().Servers, err)
	}
	if got := readAll(t, survivor.Node, "ns", nodeapi.ReadOptions{}); len(got) != 50 {
		t.Fatalf("after recovery: %d messages, want 50", len(got))
	}
	if _, err := appendOne(ctxT(t), survivor.Node, "ns", "s-0", "00000000-0000-4000-8000-000000000999"); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	survivor.Stop()
	survivor.Restart()
	testutil.Eventually(t, waitTimeout, "the survivor to lead again", survivor.IsLeader)
	if got := readAll(t, survivor.Node, "ns", nodeapi.ReadOptions{}); len(got) != 51 {
		t.Fatalf("after restart: %d messages, want 51", len(got))
	}
}

func idOf(t *testing.T, dir string) string {
	t.Helper()
	id, err := loadNodeID(dir)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
