package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// The in-process cluster is TestCluster (testcluster.go), shared with the
// tests of rpc and tests/testcluster.

const waitTimeout = 20 * time.Second

// newCluster starts a TestCluster of size nodes; mod, if not nil, changes
// every member's configuration.
func newCluster(t testing.TB, size int, mod func(*Config)) *TestCluster {
	t.Helper()
	var opts TestClusterOptions
	if mod != nil {
		opts.Config = func(_ int, cfg *Config) { mod(cfg) }
	}
	return StartTestCluster(t, size, opts)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func createNamespace(t testing.TB, n *Node, name string) {
	t.Helper()
	if _, err := n.CreateNamespace(ctxT(t), &fsmv1.CreateNamespace{Name: name}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func appendOne(ctx context.Context, n *Node, ns, stream, id string) (*fsmv1.Result, error) {
	return n.Append(ctx, &fsmv1.Append{Namespace: ns, Stream: stream, Messages: []*fsmv1.NewMessage{{Id: id, Type: "T", Data: []byte(`{"k":1}`)}}})
}

// readAll reads every message of ns on n at the given consistency.
func readAll(t testing.TB, n *Node, ns string, opts nodeapi.ReadOptions) []fsm.Message {
	t.Helper()
	var msgs []fsm.Message
	_, err := n.Read(ctxT(t), ns, opts, func(v *fsm.View) (err error) {
		msgs, err = v.ReadAll(1, -1)
		return err
	})
	if err != nil {
		t.Fatalf("read all on %s: %v", n.ID(), err)
	}
	return msgs
}

func isUnknownOrUnavailable(err error) bool {
	return errors.Is(err, nodeapi.ErrUnknownOutcome) || errors.Is(err, nodeapi.ErrNoLeader) || errors.Is(err, nodeapi.ErrShutdown)
}
