package fsm

import (
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

func groupCmd(c proto.Message) *fsmv1.Command {
	switch c := c.(type) {
	case *fsmv1.CreateGroup:
		return &fsmv1.Command{Kind: &fsmv1.Command_CreateGroup{CreateGroup: c}}
	case *fsmv1.UpdateGroup:
		return &fsmv1.Command{Kind: &fsmv1.Command_UpdateGroup{UpdateGroup: c}}
	case *fsmv1.DeleteGroup:
		return &fsmv1.Command{Kind: &fsmv1.Command_DeleteGroup{DeleteGroup: c}}
	case *fsmv1.GroupProgress:
		return &fsmv1.Command{Kind: &fsmv1.Command_GroupProgress{GroupProgress: c}}
	case *fsmv1.ReplayParked:
		return &fsmv1.Command{Kind: &fsmv1.Command_ReplayParked{ReplayParked: c}}
	case *fsmv1.DeleteParked:
		return &fsmv1.Command{Kind: &fsmv1.Command_DeleteParked{DeleteParked: c}}
	}
	panic("not a group command")
}

func groupOf(t *testing.T, r any) *fsmv1.GroupRecord {
	t.Helper()
	g, ok := memberOK[*fsmv1.GroupResult](r)
	if !ok {
		t.Fatalf("result %T %v, want a GroupResult", r, r)
	}
	return g.Group
}

func TestGroupCreateValidation(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(appendCmd("ns", "account-1", newMsg("A", `{}`), newMsg("A", `{}`)))
	cases := []struct {
		name  string
		cmd   *fsmv1.CreateGroup
		field string // "" = accepted
		err   error
	}{
		{"empty name", &fsmv1.CreateGroup{Namespace: "ns"}, "name", nil},
		{"bad name", &fsmv1.CreateGroup{Namespace: "ns", Name: "a b"}, "name", nil},
		{"stream and category", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Source: &fsmv1.GroupSource{Stream: "a-1", Category: "a"}}, "source", nil},
		{"category with dash", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Source: &fsmv1.GroupSource{Category: "a-1"}}, "category", nil},
		{"query and category", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Source: &fsmv1.GroupSource{Category: "a",
			Query: &fsmv1.Query{Items: []*fsmv1.QueryItem{{Tags: []string{"t"}}}}}}, "source", nil},
		{"query and stream", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Source: &fsmv1.GroupSource{Stream: "a-1",
			Query: &fsmv1.Query{Items: []*fsmv1.QueryItem{{Tags: []string{"t"}}}}}}, "source", nil},
		{"empty query", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Source: &fsmv1.GroupSource{Query: &fsmv1.Query{}}}, "query.items", nil},
		{"empty query item", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Source: &fsmv1.GroupSource{
			Query: &fsmv1.Query{Items: []*fsmv1.QueryItem{{Tags: []string{"t"}}, {}}}}}, "query.items[1]", nil},
		{"bad query tag", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Source: &fsmv1.GroupSource{
			Query: &fsmv1.Query{Items: []*fsmv1.QueryItem{{Tags: []string{""}}}}}}, "query.items[0].tags[0]", nil},
		{"query", &fsmv1.CreateGroup{Namespace: "ns", Name: "gq", Source: &fsmv1.GroupSource{
			Query: &fsmv1.Query{Items: []*fsmv1.QueryItem{{Types: []string{"A"}, Tags: []string{"t"}}}}}}, "", nil},
		{"negative start", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Start: -1}, "start_global_position", nil},
		{"in flight 0 is default", &fsmv1.CreateGroup{Namespace: "ns", Name: "g0", Settings: &fsmv1.GroupSettings{MaxInFlight: 0}}, "", nil},
		{"in flight too high", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Settings: &fsmv1.GroupSettings{MaxInFlight: 100_001}}, "settings.max_in_flight", nil},
		{"retries negative", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Settings: &fsmv1.GroupSettings{MaxRetries: proto.Int32(-1)}}, "settings.max_retries", nil},
		{"ack timeout short", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Settings: &fsmv1.GroupSettings{AckTimeoutNanos: int64(time.Millisecond)}}, "settings.ack_timeout", nil},
		{"bad strategy", &fsmv1.CreateGroup{Namespace: "ns", Name: "g", Settings: &fsmv1.GroupSettings{Strategy: 7}}, "settings.strategy", nil},
		{"unknown namespace", &fsmv1.CreateGroup{Namespace: "nope", Name: "g"}, "", ErrNamespaceNotFound},
		{"taken", &fsmv1.CreateGroup{Namespace: "ns", Name: "g0"}, "", ErrGroupExists},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.apply(groupCmd(tc.cmd))[0]
			var ve *ValidationError
			switch {
			case tc.field != "":
				if !errors.As(r.(error), &ve) || ve.Field != tc.field {
					t.Fatalf("got %v, want a validation error on %s", r, tc.field)
				}
			case tc.err != nil:
				if err, _ := r.(error); !errors.Is(err, tc.err) {
					t.Fatalf("got %v, want %v", r, tc.err)
				}
			default:
				groupOf(t, r)
			}
		})
	}
	// Only g0 and gq exist: every refusal changed nothing.
	gs, err := view(t, s, "ns").Groups()
	if err != nil || len(gs) != 2 || gs[0].Name != "g0" || gs[1].Name != "gq" {
		t.Fatalf("groups %v %v, want only g0 and gq", gs, err)
	}
	if q := gs[1].Source.GetQuery(); len(q.GetItems()) != 1 || !slices.Equal(q.Items[0].Types, []string{"A"}) || !slices.Equal(q.Items[0].Tags, []string{"t"}) {
		t.Fatalf("gq's source %v, want the query of type A tag t", gs[1].Source)
	}
}

func TestGroupLifecycle(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, nil)
	f := newFeeder(t, s)
	f.must(createNS("ns"))
	f.must(appendCmd("ns", "account-1", newMsg("A", `{}`), newMsg("A", `{}`), newMsg("A", `{}`)))
	g := groupOf(t, f.must(groupCmd(&fsmv1.CreateGroup{Namespace: "ns", Name: "end", StartAtEnd: true})))
	if g.Start != 4 || g.Checkpoint != 4 {
		t.Fatalf("start at end: start %d checkpoint %d, want 4 4", g.Start, g.Checkpoint)
	}
	g = groupOf(t, f.must(groupCmd(&fsmv1.CreateGroup{Namespace: "ns", Name: "g", Source: &fsmv1.GroupSource{Category: "account"}})))
	if g.Start != 1 || g.Settings.MaxInFlight != DefaultGroupInFlight || g.Settings.GetMaxRetries() != DefaultGroupMaxRetries {
		t.Fatalf("created %v, want start 1 and default settings", g)
	}
	// Update changes only the fields given.
	g = groupOf(t, f.must(groupCmd(&fsmv1.UpdateGroup{Namespace: "ns", Name: "g", Settings: &fsmv1.GroupSettings{MaxRetries: proto.Int32(0), Strategy: fsmv1.GroupStrategy_GROUP_STRATEGY_PINNED}})))
	if g.Settings.GetMaxRetries() != 0 || g.Settings.Strategy != fsmv1.GroupStrategy_GROUP_STRATEGY_PINNED || g.Settings.MaxInFlight != DefaultGroupInFlight {
		t.Fatalf("updated settings %v", g.Settings)
	}
	// Progress: checkpoint 3 with gp 2 parked; a lower checkpoint later never moves it back.
	g = groupOf(t, f.must(groupCmd(&fsmv1.GroupProgress{Namespace: "ns", Name: "g", Incarnation: g.Id, Checkpoint: 3,
		Parked: []*fsmv1.ParkedMessage{{GlobalPosition: 2, Stream: "account-1", Position: 1, Reason: "poison"}}})))
	if g.Checkpoint != 3 || g.ParkedCount != 1 {
		t.Fatalf("after progress: checkpoint %d parked %d, want 3 1", g.Checkpoint, g.ParkedCount)
	}
	g = groupOf(t, f.must(groupCmd(&fsmv1.GroupProgress{Namespace: "ns", Name: "g", Incarnation: g.Id, Checkpoint: 2})))
	if g.Checkpoint != 3 {
		t.Fatalf("checkpoint moved back to %d", g.Checkpoint)
	}
	if r := f.apply(groupCmd(&fsmv1.GroupProgress{Namespace: "ns", Name: "g", Incarnation: g.Id + 1, Checkpoint: 9}))[0]; !errors.Is(r.(error), ErrGroupNotFound) {
		t.Fatalf("progress for another incarnation: %v, want ErrGroupNotFound", r)
	}
	// Replay of an unknown position changes nothing; of a parked one moves it.
	if r := f.apply(groupCmd(&fsmv1.ReplayParked{Namespace: "ns", Name: "g", GlobalPositions: []int64{3}}))[0]; !errors.Is(r.(error), ErrParkedNotFound) {
		t.Fatalf("replay of unparked 3: %v", r)
	}
	pc := member[*fsmv1.ParkedChangeResult](f.must(groupCmd(&fsmv1.ReplayParked{Namespace: "ns", Name: "g"})))
	if pc.Changed != 1 || pc.Parked != 0 {
		t.Fatalf("replay all: %+v", pc)
	}
	v := view(t, s, "ns")
	rp, err := v.Replaying("g")
	if err != nil || len(rp) != 1 || rp[0].GlobalPosition != 2 || rp[0].Reason != "poison" {
		t.Fatalf("replaying %v %v", rp, err)
	}
	// Settled again: the replay key goes.
	g = groupOf(t, f.must(groupCmd(&fsmv1.GroupProgress{Namespace: "ns", Name: "g", Incarnation: g.Id, Checkpoint: 4, Replayed: []int64{2}})))
	if g.ReplayCount != 0 || g.ParkedCount != 0 || g.Checkpoint != 4 {
		t.Fatalf("after settling the replay: %v", g)
	}
	// Park two, delete one.
	f.must(groupCmd(&fsmv1.GroupProgress{Namespace: "ns", Name: "g", Incarnation: g.Id, Checkpoint: 4,
		Parked: []*fsmv1.ParkedMessage{{GlobalPosition: 1}, {GlobalPosition: 3}}}))
	pc = member[*fsmv1.ParkedChangeResult](f.must(groupCmd(&fsmv1.DeleteParked{Namespace: "ns", Name: "g", GlobalPositions: []int64{1}})))
	if pc.Changed != 1 || pc.Parked != 1 {
		t.Fatalf("delete parked: %+v", pc)
	}
	v2 := view(t, s, "ns")
	parked, err := v2.Parked("g", 0, -1)
	if err != nil || len(parked) != 1 || parked[0].GlobalPosition != 3 {
		t.Fatalf("parked %v %v, want [3]", parked, err)
	}
	f.must(groupCmd(&fsmv1.DeleteGroup{Namespace: "ns", Name: "g"}))
	v3 := view(t, s, "ns")
	if _, err := v3.Group("g"); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("deleted group reads %v", err)
	}
	if parked, _ := v3.Parked("g", 0, -1); len(parked) != 0 {
		t.Fatalf("deleted group keeps parked %v", parked)
	}
	gs, _ := v3.Groups()
	if names := []string{}; len(gs) != 1 || !slices.Equal(append(names, gs[0].Name), []string{"end"}) {
		t.Fatalf("groups left %v", gs)
	}
}
