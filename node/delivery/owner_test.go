package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

const waitTimeout = 10 * time.Second

// startOwner returns an owner over h, stopped and waited for at the end
// of the test.
func startOwner(t *testing.T, h *testHost, mod func(*Config)) *Owner {
	t.Helper()
	life, end := context.WithCancel(context.Background())
	cfg := Config{NotOwner: errTestNotOwner, ApplyTimeout: time.Second, Heartbeat: 50 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	o := New(life, h, cfg)
	t.Cleanup(func() { end(); o.Wait() })
	return o
}

// consumer runs Consume on its own goroutine.
type consumer struct {
	got   chan nodeapi.GroupDelivery
	beats chan struct{}
	done  chan error
}

func consume(t *testing.T, o *Owner, ns, group, name string) *consumer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{got: make(chan nodeapi.GroupDelivery, 100), beats: make(chan struct{}, 100), done: make(chan error, 1)}
	go func() {
		c.done <- o.Consume(ctx, ns, group, name, func(d nodeapi.GroupDelivery) error {
			c.got <- d
			return nil
		}, func() error {
			select {
			case c.beats <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-c.done })
	select {
	case <-c.beats: // attached
	case err := <-c.done:
		t.Fatalf("consumer %s ended before attaching: %v", name, err)
	case <-time.After(waitTimeout):
		t.Fatalf("consumer %s: no first heartbeat", name)
	}
	return c
}

func (c *consumer) next(t *testing.T) nodeapi.GroupDelivery {
	t.Helper()
	select {
	case d := <-c.got:
		return d
	case err := <-c.done:
		t.Fatalf("consumer ended: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("no delivery")
	}
	return nodeapi.GroupDelivery{}
}

func (h *testHost) createGroup(ns, name string, s *fsmv1.GroupSettings) {
	h.t.Helper()
	h.must(&fsmv1.Command{Kind: &fsmv1.Command_CreateGroup{CreateGroup: &fsmv1.CreateGroup{
		Namespace: ns, Name: name, Source: &fsmv1.GroupSource{Category: "job"}, Settings: s,
	}}})
}

// nextSave waits for the next progress save.
func (h *testHost) nextSave(t *testing.T) *fsmv1.GroupProgress {
	t.Helper()
	select {
	case p := <-h.saved:
		return p
	case <-time.After(waitTimeout):
		t.Fatal("no progress saved")
	}
	return nil
}

func (h *testHost) group(ns, name string) *fsmv1.GroupRecord {
	h.t.Helper()
	v, err := h.View(ns)
	if err != nil {
		h.t.Fatal(err)
	}
	defer v.Close()
	rec, err := v.Group(name)
	if err != nil {
		h.t.Fatal(err)
	}
	return rec
}

// The engine alone delivers a group's messages in order, counts a nack as
// a redelivery, and saves as checkpoint the lowest unsettled position,
// never the read position, through the proposals it makes.
func TestGroupOwnerDeliversAndSavesLowestUnsettled(t *testing.T) {
	h := newTestHost(t)
	h.createNamespace("app")
	h.createGroup("app", "g", &fsmv1.GroupSettings{CheckpointAfter: 1})
	var gps []int64
	for i := range 3 {
		gps = append(gps, h.appendOne("app", fmt.Sprintf("job-%d", i)))
	}
	o := startOwner(t, h, nil)
	c := consume(t, o, "app", "g", "c1")
	var got []nodeapi.GroupDelivery
	for range gps {
		got = append(got, c.next(t))
	}
	for i, d := range got {
		if d.Message.GlobalPosition != gps[i] || d.Delivery != 1 {
			t.Fatalf("delivery %d = gp %d (delivery %d), want gp %d (delivery 1)",
				i, d.Message.GlobalPosition, d.Delivery, gps[i])
		}
	}
	// The second and third settle; the first stays unsettled.
	if err := o.Settle("app", "g", []string{got[1].Message.ID, got[2].Message.ID}, nodeapi.SettleAck, ""); err != nil {
		t.Fatal(err)
	}
	if p := h.nextSave(t); p.Checkpoint != gps[0] || h.group("app", "g").Checkpoint != gps[0] {
		t.Fatalf("saved checkpoint %d (record %d) with gp %d unsettled, want %d",
			p.Checkpoint, h.group("app", "g").Checkpoint, gps[0], gps[0])
	}
	// A settle of what is not in flight settles nothing.
	var nif *nodeapi.NotInFlightError
	err := o.Settle("app", "g", []string{got[0].Message.ID, got[1].Message.ID}, nodeapi.SettleAck, "")
	if !errors.As(err, &nif) || len(nif.IDs) != 1 || nif.IDs[0] != got[1].Message.ID {
		t.Fatalf("settle of one id in flight and one settled = %v, want NotInFlightError for the settled one", err)
	}
	if err := o.Settle("app", "g", []string{got[0].Message.ID}, nodeapi.SettleRetry, ""); err != nil {
		t.Fatal(err)
	}
	if d := c.next(t); d.Message.GlobalPosition != gps[0] || d.Delivery != 2 {
		t.Fatalf("after a nack got gp %d (delivery %d), want gp %d (delivery 2)",
			d.Message.GlobalPosition, d.Delivery, gps[0])
	}
	if err := o.Settle("app", "g", []string{got[0].Message.ID}, nodeapi.SettleAck, ""); err != nil {
		t.Fatal(err)
	}
	if p := h.nextSave(t); p.Checkpoint != gps[2]+1 {
		t.Fatalf("saved checkpoint %d with every message settled, want %d", p.Checkpoint, gps[2]+1)
	}
	if st, _ := o.Stats("app", "g"); st.Redeliveries != 1 || st.Acked != 3 || st.Consumers != 1 {
		t.Fatalf("stats %+v, want 1 redelivery, 3 acked, 1 consumer", st)
	}
}

// When the node stops owning groups, every call fails with Config.NotOwner
// (so the node attaches its consumers elsewhere), and a dispatcher whose
// save fails stops with it too, wrapped.
func TestGroupOwnerStopsWithNotOwner(t *testing.T) {
	for _, how := range []string{"stop all", "save fails"} {
		t.Run(how, func(t *testing.T) {
			h := newTestHost(t)
			h.createNamespace("app")
			h.createGroup("app", "g", &fsmv1.GroupSettings{CheckpointAfter: 1})
			h.appendOne("app", "job-1")
			var saves int
			o := startOwner(t, h, func(cfg *Config) {
				if how == "save fails" {
					// Ownership ends just as the save is proposed.
					cfg.Checkpoint = func(lowest, _ int64) int64 { saves++; h.owning.Store(false); return lowest }
				}
			})
			c := consume(t, o, "app", "g", "c1")
			d := c.next(t)
			switch how {
			case "stop all":
				h.owning.Store(false)
				o.StopAll(errTestNotOwner)
			case "save fails":
				if err := o.Settle("app", "g", []string{d.Message.ID}, nodeapi.SettleAck, ""); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-c.done:
				if !errors.Is(err, errTestNotOwner) {
					t.Fatalf("consumer ended with %v, want %v", err, errTestNotOwner)
				}
				if how == "save fails" && !strings.Contains(err.Error(), "group owner stopped") {
					t.Fatalf("consumer ended with %q, want the owner stopped for its failed save", err)
				}
				c.done <- err // for the cleanup
			case <-time.After(waitTimeout):
				t.Fatal("consumer still attached")
			}
			if _, ok := o.Stats("app", "g"); ok {
				t.Fatal("stats of a group on a node that does not own it")
			}
			if err := o.Settle("app", "g", []string{d.Message.ID}, nodeapi.SettleAck, ""); !errors.Is(err, errTestNotOwner) {
				t.Fatalf("settle = %v, want %v", err, errTestNotOwner)
			}
			if how == "save fails" && saves == 0 {
				t.Fatal("no save was attempted")
			}
		})
	}
}
