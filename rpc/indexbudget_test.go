package rpc

import (
	"net/http"
	"testing"
	"time"

	"github.com/skalddb/skald/node"
)

// singleIndexBudget starts one node whose Connect reads have a scan budget
// of budget and whose index loop waits an hour between rounds that no
// reader kicked: a removal stays in its index until a LINEARIZABLE read
// (TestIndexQueryScanBudget, indexes_test.go).
func singleIndexBudget(t *testing.T, budget int) *server {
	t.Helper()
	c := node.StartTestCluster(t, 1, node.TestClusterOptions{
		Config: func(_ int, cfg *node.Config) { cfg.ReadWait, cfg.IndexInterval = 2*time.Second, time.Hour },
		Handler: func(tn *node.TestNode) http.Handler {
			o := defaultOptions
			o.Registerer, o.Gatherer, o.Limits = tn.Registry, tn.Registry, Limits{ScanBudget: budget}
			return NewHandler(tn.Node, o)
		},
	})
	l := c.Leader()
	createAdmin(t, l.Node)
	return &server{n: l.Node, addr: l.Addr, reg: l.Registry}
}
