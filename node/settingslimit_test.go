package node

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// A namespace holds at most the leader's limit of subscription groups and
// of credentials (the initial credential counts): a create past it is a
// SettingsLimitError through the leader and, carried by the peer
// protocol, through a follower; nothing is proposed; once one is deleted
// or revoked there is room again. Another namespace has its own room.
func TestSettingsLimit(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, func(cfg *Config) { cfg.MaxGroupsPerNamespace, cfg.MaxCredentialsPerNamespace = 2, 2 })
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	createNamespace(t, l.Node, "other")
	f := c.Followers()[0]
	h := sha256.Sum256([]byte("token"))
	group := func(n *TestNode, ns, name string) error {
		_, err := n.CreateGroup(ctxT(t), &fsmv1.CreateGroup{Namespace: ns, Name: name})
		return err
	}
	cred := func(n *TestNode, ns, name string, id uint64) error {
		_, err := n.CreateCredential(ctxT(t), &fsmv1.CreateCredential{Namespace: ns, Id: id, Name: name, Role: 1, TokenHash: h[:]})
		return err
	}
	for _, step := range []struct {
		name    string
		do      func() error
		limited string // "": the call succeeds; else what the limit names
	}{
		{"first group", func() error { return group(l, "app", "g1") }, ""},
		{"second group through a follower", func() error { return group(f, "app", "g2") }, ""},
		{"third group through the leader", func() error { return group(l, "app", "g3") }, "subscription groups"},
		{"third group through a follower", func() error { return group(f, "app", "g3") }, "subscription groups"},
		{"a group of another namespace", func() error { return group(f, "other", "g1") }, ""},
		{"second credential (the initial one counts)", func() error { return cred(f, "app", "c1", 11) }, ""},
		{"third credential through a follower", func() error { return cred(f, "app", "c2", 12) }, "credentials"},
		{"delete a group", func() error {
			_, err := l.DeleteGroup(ctxT(t), &fsmv1.DeleteGroup{Namespace: "app", Name: "g1"})
			return err
		}, ""},
		{"a group in the freed room", func() error { return group(f, "app", "g3") }, ""},
		{"revoke a credential", func() error {
			_, err := l.RevokeCredential(ctxT(t), &fsmv1.RevokeCredential{Namespace: "app", Name: "c1"})
			return err
		}, ""},
		{"a credential in the freed room", func() error { return cred(f, "app", "c2", 12) }, ""},
	} {
		before := l.AppliedIndex()
		err := step.do()
		if step.limited == "" {
			if err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			c.WaitConverged()
			continue
		}
		var le *nodeapi.SettingsLimitError
		if !errors.As(err, &le) || !errors.Is(err, nodeapi.ErrSettingsLimit) || le.Namespace != "app" || le.What != step.limited || le.Limit != 2 {
			t.Fatalf("%s: %v (%#v), want a SettingsLimitError for %s of app, limit 2", step.name, err, le, step.limited)
		}
		if want := fmt.Sprintf("namespace %q holds 2 %s", "app", step.limited); !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %q does not say %q", step.name, err, want)
		}
		if after := l.AppliedIndex(); after != before {
			t.Fatalf("%s: the refusal moved the applied index %d -> %d: something was proposed", step.name, before, after)
		}
	}
}

// TestSettingsLimitHoldsUnderConcurrentCreates: creates proposed at once
// cannot pass the limit together (the leader counts its own creates in
// flight beside the applied ones): of 24 concurrent group creates under a
// limit of 5, exactly 5 succeed, the others are SettingsLimitErrors, and
// the namespace holds 5 groups.
func TestSettingsLimitHoldsUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	const limit, callers = 5, 24
	c := newCluster(t, 3, func(cfg *Config) { cfg.MaxGroupsPerNamespace = limit })
	l := c.Leader()
	createNamespace(t, l.Node, "app")
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.CreateGroup(ctxT(t), &fsmv1.CreateGroup{Namespace: "app", Name: fmt.Sprintf("g%d", i)})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, nodeapi.ErrSettingsLimit):
		default:
			t.Fatalf("create: %v, want success or a SettingsLimitError", err)
		}
	}
	v, err := l.store.View("app")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	n, err := v.GroupCount(callers)
	if err != nil {
		t.Fatal(err)
	}
	if ok != limit || n != limit {
		t.Fatalf("%d creates succeeded, the namespace holds %d groups; want %d and %d", ok, n, limit, limit)
	}
}
