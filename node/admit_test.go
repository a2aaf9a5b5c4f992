package node

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/skalddb/skald/internal/testutil"
)

// A server whose state machine is older than the leader's is not added to
// the configuration (it would replay entries it applies otherwise, and
// diverge); once it runs the leader's version it joins. A server already
// in the configuration is not asked (a promotion, a new address).
func TestAddRefusesOlderServer(t *testing.T) {
	var older atomic.Bool
	c := StartTestCluster(t, 2, TestClusterOptions{Config: func(i int, cfg *Config) {
		if i == 1 && older.Load() {
			cfg.olderStateMachine = true
		}
	}})
	l, f := c.Nodes[0], c.Nodes[1] // the bootstrap node leads a 2-node cluster
	// Already a voter: re-adding (an address update) is not refused
	// even while it reports an older version.
	older.Store(true)
	f.Stop()
	f.Restart()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	// Two voters: l lost its quorum while f was down, and either may win
	// the election that follows. The test needs l leading.
	testutil.Until(t, waitTimeout, "the first node to lead again", func() (bool, string) {
		if l.IsLeader() {
			return true, ""
		}
		if f.IsLeader() {
			_ = f.TransferLeadership(ctx, l.ID())
		}
		return false, "l does not lead"
	})
	if err := l.AddVoter(ctx, f.ID(), f.Proxy.Addr()); err != nil {
		t.Fatalf("re-adding a member: %v", err)
	}
	if err := l.RemoveServer(ctx, f.ID()); err != nil {
		t.Fatal(err)
	}
	for _, add := range []struct {
		name string
		fn   func(ctx context.Context, id, addr string) error
	}{{"voter", l.AddVoter}, {"non-voter", l.AddNonvoter}} {
		err := add.fn(ctx, f.ID(), f.Proxy.Addr())
		if !errors.Is(err, ErrJoinerTooOld) {
			t.Fatalf("adding an older server as a %s: %v, want ErrJoinerTooOld", add.name, err)
		}
	}
	servers, err := l.Servers()
	if err != nil || len(servers) != 1 {
		t.Fatalf("configuration after the refusals: %v, %v; want the leader alone", servers, err)
	}
	older.Store(false)
	f.Stop()
	f.Restart()
	if err := l.AddVoter(ctx, f.ID(), f.Proxy.Addr()); err != nil {
		t.Fatalf("adding the upgraded server: %v", err)
	}
	if servers, err := l.Servers(); err != nil || len(servers) != 2 {
		t.Fatalf("configuration after the upgrade: %v, %v", servers, err)
	}
}
