package node

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/testutil"
	"github.com/skalddb/skald/node/nodeapi"
)

// waitVersionsRecorded waits until n's replica records every member of c
// at version v or above.
func waitVersionsRecorded(t *testing.T, c *TestCluster, n *Node, v uint32) {
	t.Helper()
	testutil.Until(t, waitTimeout, "every server's version to be recorded", func() (bool, string) {
		for _, tn := range c.Nodes {
			if got, ok := n.ServerVersion(tn.Node.ID()); !ok || got < v {
				return false, fmt.Sprintf("%s recorded at %d (%v)", tn.Node.ID(), got, ok)
			}
		}
		return true, ""
	})
}

// The version gate decides from what each server last reported: while a
// follower that reported version 2 is stopped, killed, cut off or paused,
// a credential is revoked and another created through the leader, an index
// created, a namespace created indexed by type from its first message, and
// a node restarted meanwhile (it cannot reach the down follower) takes a
// create too, from the record its replica holds.
func TestVersionGateTrustsLastReported(t *testing.T) {
	h := sha256.Sum256([]byte("token"))
	for _, tc := range []struct {
		name string
		down func(tn *TestNode)
	}{
		{"stopped", func(tn *TestNode) { tn.Stop() }},
		{"killed", func(tn *TestNode) { tn.Kill() }},
		{"unreachable", func(tn *TestNode) { tn.Proxy.SetBlocked(true) }},
		{"paused", func(tn *TestNode) { tn.Proxy.SetStalled(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, nil)
			l := c.Leader()
			createNamespace(t, l.Node, "app")
			if _, err := l.CreateCredential(ctxT(t), &fsmv1.CreateCredential{Namespace: "app", Id: 42, Name: "leaked",
				Role: uint32(fsm.RoleWriter), TokenHash: h[:]}); err != nil {
				t.Fatalf("create with every server up: %v", err)
			}
			waitVersionsRecorded(t, c, l.Node, fsm.CredentialsVersion)
			c.WaitConverged()
			fs := c.Others(l)
			down, other := fs[0], fs[1]
			downID := down.ID()
			tc.down(down)

			res, err := l.RevokeCredential(ctxT(t), &fsmv1.RevokeCredential{Namespace: "app", Name: "leaked"})
			if err != nil || res.GetCredential().GetName() != "leaked" {
				t.Fatalf("revoke with %s %s: %+v, %v", downID, tc.name, res, err)
			}
			if _, _, ok := l.Credential("app", 42); ok {
				t.Fatal("the leader still holds the revoked credential")
			}
			res, err = l.CreateCredential(ctxT(t), &fsmv1.CreateCredential{Namespace: "app", Id: 43, Name: "next",
				Role: uint32(fsm.RoleReader), TokenHash: h[:]})
			if err != nil || res.GetCredential().GetName() != "next" {
				t.Fatalf("create with %s %s: %+v, %v", downID, tc.name, res, err)
			}
			if cred, _, ok := l.Credential("app", 43); !ok || cred.Role != fsm.RoleReader {
				t.Fatalf("credential 43 on the leader = %+v, %v", cred, ok)
			}
			if res, err := l.CreateIndex(ctxT(t), amountIndex("app")); err != nil || res.Index == 0 {
				t.Fatalf("create an index with %s %s: %+v, %v", downID, tc.name, res, err)
			}
			createNamespace(t, l.Node, "later")
			writeN(t, l.Node, "later", 2)
			if gps, complete := typeQuery(t, l.Node, "later"); !complete || !reflect.DeepEqual(gps, []int64{1, 2}) {
				t.Fatalf("namespace created with %s %s: type query %v, complete %v; want [1 2], complete",
					downID, tc.name, gps, complete)
			}

			other.Stop()
			other.Restart()
			res, err = other.CreateCredential(ctxT(t), &fsmv1.CreateCredential{Namespace: "app", Id: 44, Name: "after",
				Role: uint32(fsm.RoleReader), TokenHash: h[:]})
			if err != nil || res.GetCredential().GetName() != "after" {
				t.Fatalf("create through %s, restarted with %s %s: %+v, %v", other.ID(), downID, tc.name, res, err)
			}
		})
	}
}

// A server the cluster has no version recorded for, that does not answer,
// still blocks the kinds that need a version, and the refusal names it;
// nothing is proposed. A revocation needs no version and goes.
func TestVersionGateNamesServerNeverReported(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.VersionInterval = -1 }) // the leader records nothing
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	h := sha256.Sum256([]byte("token"))
	if _, err := l.CreateCredential(ctxT(t), &fsmv1.CreateCredential{Namespace: "app", Id: 42, Name: "leaked",
		Role: uint32(fsm.RoleWriter), TokenHash: h[:]}); err != nil {
		t.Fatalf("create with every server up: %v", err)
	}
	down := c.Others(l)[0]
	id := down.ID()
	if v, ok := l.ServerVersion(id); ok {
		t.Fatalf("%s recorded at %d with the recording off", id, v)
	}
	down.Stop()

	before := l.AppliedIndex()
	for _, tc := range []struct {
		kind  string
		apply func() error
	}{
		{"create_credential", func() error {
			_, err := l.CreateCredential(ctxT(t), &fsmv1.CreateCredential{Namespace: "app", Id: 43, Name: "next",
				Role: uint32(fsm.RoleReader), TokenHash: h[:]})
			return err
		}},
		{"create_index", func() error { _, err := l.CreateIndex(ctxT(t), amountIndex("app")); return err }},
	} {
		err := tc.apply()
		if !errors.Is(err, nodeapi.ErrUpgradeRequired) {
			t.Fatalf("%s with %s down and never recorded: %v, want ErrUpgradeRequired", tc.kind, id, err)
		}
		t.Logf("%s refused: %v", tc.kind, err)
		for _, want := range []string{
			tc.kind, fmt.Sprintf("server %q does not answer", id), "has no state machine version recorded for it",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s refused with %q: it does not say %q", tc.kind, err, want)
			}
		}
	}
	if got := l.AppliedIndex(); got != before {
		t.Fatalf("refused commands moved the applied index from %d to %d", before, got)
	}
	if _, _, ok := l.Credential("app", 43); ok {
		t.Fatal("a refused create was applied")
	}
	if res, err := l.RevokeCredential(ctxT(t), &fsmv1.RevokeCredential{Namespace: "app", Name: "leaked"}); err != nil ||
		res.GetCredential().GetName() != "leaked" {
		t.Fatalf("revoke with %s down and never recorded: %+v, %v", id, res, err)
	}
	if _, _, ok := l.Credential("app", 42); ok {
		t.Fatal("the leader still holds the revoked credential")
	}
}

// A record is what the server last said, lower too: a server that comes
// back reporting version 1 blocks version 2 once the leader has heard it,
// and the refusal says what it reports; stopped, it blocks still, and the
// refusal says it does not answer and what it last reported.
func TestVersionGateSaysWhatServerLastReported(t *testing.T) {
	var older atomic.Bool
	c := StartTestCluster(t, 3, TestClusterOptions{Config: func(i int, cfg *Config) {
		cfg.VersionInterval = 100 * time.Millisecond
		cfg.olderStateMachine = i > 0 && older.Load()
	}})
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	waitVersionsRecorded(t, c, l.Node, fsm.StateMachineVersion)
	f := c.Others(l)[0]
	id := f.ID()
	older.Store(true)
	f.Stop()
	f.Restart()
	testutil.Until(t, waitTimeout, "the leader to record what the restarted server reports", func() (bool, string) {
		v, ok := l.ServerVersion(id)
		return ok && v == fsm.StateMachineVersion-1, fmt.Sprintf("recorded %d, %v", v, ok)
	})
	h := sha256.Sum256([]byte("token"))
	create := func() error {
		_, err := l.CreateCredential(ctxT(t), &fsmv1.CreateCredential{Namespace: "app", Id: 42, Name: "c",
			Role: uint32(fsm.RoleReader), TokenHash: h[:]})
		return err
	}
	older1 := fsm.StateMachineVersion - 1
	for _, tc := range []struct {
		name string
		do   func()
		want []string
	}{
		{"reports older", func() {}, []string{fmt.Sprintf("server %q reports state machine version %d", id, older1)}},
		{"stopped", f.Stop, []string{
			fmt.Sprintf("server %q does not answer", id), fmt.Sprintf("last reported state machine version %d", older1),
		}},
	} {
		tc.do()
		err := create()
		if !errors.Is(err, nodeapi.ErrUpgradeRequired) {
			t.Fatalf("%s: create = %v; want ErrUpgradeRequired", tc.name, err)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: create refused with %q; it does not say %q", tc.name, err, want)
			}
		}
	}
	if _, _, ok := l.Credential("app", 42); ok {
		t.Fatal("a refused create was applied")
	}
}
