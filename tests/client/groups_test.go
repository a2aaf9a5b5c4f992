package client_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestGroups drives a persistent subscription through the client on a
// 3-node cluster with a namespace token: create, consume, ack, park by
// nack, list, replay, refusals.
func TestGroups(t *testing.T) {
	cl := testcluster.Start(t, 3)
	admin := newTestClient(t, cl.Endpoints(), "")
	c := namespaceClient(t, admin, cl.Endpoints(), "groups")
	ctx := ctxT(t)
	appendN(t, c, "task-1", "Do", 3)
	retries := int32(0)
	g, err := c.CreateGroup(ctx, client.GroupSpec{Name: "workers", Category: "task", Settings: client.GroupSettings{MaxRetries: &retries, AckTimeout: time.Second}})
	if err != nil || g.Category != "task" || g.Checkpoint != 1 || *g.Settings.MaxRetries != 0 || g.Settings.MaxInFlight != 1000 {
		t.Fatalf("create: %+v %v", g, err)
	}
	if _, err := c.CreateGroup(ctx, client.GroupSpec{Name: "workers"}); !errors.Is(err, client.ErrAlreadyExists) {
		t.Fatalf("create again: %v", err)
	}
	if _, err := c.CreateGroup(ctx, client.GroupSpec{Name: "x", Settings: client.GroupSettings{MaxInFlight: 200_000}}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("create out of range: %v", err)
	}
	q := client.Query{{Types: []string{"Do"}, Tags: []string{"urgent"}}}
	if g, err := c.CreateGroup(ctx, client.GroupSpec{Name: "urgent", Query: q}); err != nil || !reflect.DeepEqual(g.Query, q) || g.Category != "" {
		t.Fatalf("create on a query: %+v %v", g, err)
	}
	if _, err := c.CreateGroup(ctx, client.GroupSpec{Name: "y", Category: "task", Query: q}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("create on a category and a query: %v", err)
	}
	if _, err := c.CreateGroup(ctx, client.GroupSpec{Name: "y", Query: client.Query{{}}}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("create on an empty query item: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var parkedID string
	n := 0
	for d, err := range c.Consume(cctx, "workers", "w1") {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if d.Position == 1 {
			parkedID = d.ID
			if err := c.Nack(ctx, "workers", client.NackRetry, "", d.ID); err != nil { // max retries 0: parked
				t.Fatal(err)
			}
		} else if err := c.Ack(ctx, "workers", d.ID); err != nil {
			t.Fatal(err)
		} else if err := c.Ack(ctx, "workers", d.ID); !errors.Is(err, client.ErrNotInFlight) {
			t.Fatalf("second ack of %s: %v, want ErrNotInFlight", d.ID, err)
		}
		if n == 3 {
			break
		}
	}
	if err := c.Ack(ctx, "workers", parkedID); !errors.Is(err, client.ErrNotInFlight) {
		t.Fatalf("ack of a parked message: %v", err)
	}
	var parked []client.ParkedMessage
	testcluster.WaitFor(t, "the parked message", func() bool {
		p, total, err := c.ListParked(ctx, "workers", 0, 0, client.WithSession())
		parked = p
		return err == nil && total == 1
	})
	if parked[0].ID != parkedID || parked[0].Stream != "task-1" || parked[0].Deliveries != 1 {
		t.Fatalf("parked %+v", parked)
	}
	if replayed, left, err := c.ReplayParked(ctx, "workers"); err != nil || replayed != 1 || left != 0 {
		t.Fatalf("replay: %d %d %v", replayed, left, err)
	}
	for d, err := range c.Consume(cctx, "workers", "w2") {
		if err != nil {
			t.Fatal(err)
		}
		if d.ID != parkedID || d.Attempt != 1 {
			t.Fatalf("after replay got %s attempt %d", d.ID, d.Attempt)
		}
		if err := c.Ack(ctx, "workers", d.ID); err != nil {
			t.Fatal(err)
		}
		break
	}
	testcluster.WaitFor(t, "the group settled", func() bool {
		g, err := c.GetGroup(ctx, "workers", client.WithLinearizable())
		return err == nil && g.Checkpoint == 4 && g.Parked == 0 && g.Replaying == 0
	})
	groups, err := c.ListGroups(ctx)
	if err != nil || len(groups) != 2 || groups[0].Name != "urgent" || groups[1].Name != "workers" {
		t.Fatalf("list: %+v %v", groups, err)
	}
	if err := c.DeleteGroup(ctx, "workers"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetGroup(ctx, "workers", client.WithSession()); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	for _, err := range c.Consume(ctx, "workers", "w3") {
		if !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("consume a deleted group: %v", err)
		}
		break
	}
}

// TestGroupSurvivesLeaderCrash: acknowledged progress is checkpointed
// through Raft; when the leader crashes, Consume reattaches through
// another member, the new leader continues from the checkpoint, and every
// message is acknowledged, none skipped.
func TestGroupSurvivesLeaderCrash(t *testing.T) {
	cl := testcluster.Start(t, 3)
	admin := newTestClient(t, cl.Endpoints(), "")
	c := namespaceClient(t, admin, cl.Endpoints(), "crash")
	ctx := ctxT(t)
	if _, err := c.CreateGroup(ctx, client.GroupSpec{Name: "g", Category: "job", Settings: client.GroupSettings{CheckpointAfter: 1, AckTimeout: time.Second}}); err != nil {
		t.Fatal(err)
	}
	appendN(t, c, "job-1", "Run", 30)
	acked := map[int64]bool{}
	killed := false
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for d, err := range c.Consume(cctx, "g", "w") {
		if err != nil {
			t.Fatalf("consume: %v", err)
		}
		if err := c.Ack(ctx, "g", d.ID); err != nil {
			if !errors.Is(err, client.ErrNotInFlight) && !errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrUnknownOutcome) {
				t.Fatalf("ack %d: %v", d.GlobalPosition, err)
			}
			continue // delivered again later
		}
		acked[d.GlobalPosition] = true
		if len(acked) == 10 && !killed {
			testcluster.WaitFor(t, "the checkpoint at 11", func() bool {
				g, err := c.GetGroup(ctx, "g", client.WithLinearizable())
				return err == nil && g.Checkpoint == 11
			})
			cl.Kill(cl.Leader())
			killed = true
		}
		if len(acked) == 30 {
			break
		}
	}
	for gp := int64(1); gp <= 30; gp++ {
		if !acked[gp] {
			t.Fatalf("message %d never acknowledged", gp)
		}
	}
	testcluster.WaitFor(t, "the checkpoint at 31", func() bool {
		g, err := c.GetGroup(ctx, "g", client.WithLinearizable())
		return err == nil && g.Checkpoint == 31
	})
}
