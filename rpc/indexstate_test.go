package rpc

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/testutil"
)

// TestIndexesPauseResume pauses an index through Connect: List shows it
// paused, a LOCAL query answers with its lag, a LINEARIZABLE one that it
// cannot satisfy is refused at once (FAILED_PRECONDITION naming the
// state), Resume lets it catch up, and bad input is refused naming what
// was wrong.
func TestIndexesPauseResume(t *testing.T) {
	t.Parallel()
	s := single(t)
	ctx := ctxT(t)
	admin := newClients(s, protocols[0], adminToken)
	created, err := admin.namespaces.Create(ctx, connect.NewRequest(&skaldv1.CreateRequest{Name: "shop"}))
	if err != nil {
		t.Fatal(err)
	}
	own := newClients(s, protocols[0], created.Msg.Token)
	appendN := func(n, from int) {
		t.Helper()
		for i := range n {
			if _, err := own.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("acct-%d", i%3),
				Messages: []*skaldv1.NewMessage{{Type: "T", Data: fmt.Appendf(nil, `{"amount":%d}`, from+i)}}})); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(5, 0)
	if _, err := own.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: amountDefinition()})); err != nil {
		t.Fatal(err)
	}
	// LINEARIZABLE waits for the index: it holds the 5 events.
	if q, err := own.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", PositionsOnly: true})); err != nil || len(q.Msg.Hits) != 5 {
		t.Fatalf("query before the pause: %v, %v", q, err)
	}
	p, err := own.indexes.Pause(ctx, connect.NewRequest(&skaldv1.IndexesPauseRequest{Name: "amount"}))
	if err != nil || p.Msg.Index == 0 {
		t.Fatalf("pause: %v, %v", p, err)
	}
	appendN(4, 100)
	list, err := own.indexes.List(ctx, connect.NewRequest(&skaldv1.IndexesListRequest{}))
	if err != nil || len(list.Msg.Indexes) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	if st := list.Msg.Indexes[0].Status; st.State != skaldv1.IndexState_INDEX_STATE_PAUSED || !st.Paused || st.Checkpoint != 5 || st.LagEvents != 4 {
		t.Fatalf("paused status %v", st)
	}
	local := &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LOCAL}
	q, err := own.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", PositionsOnly: true, Read: local}))
	if err != nil || len(q.Msg.Hits) != 5 || q.Msg.Status.GetLagEvents() != 4 || q.Msg.Status.GetState() != skaldv1.IndexState_INDEX_STATE_PAUSED {
		t.Fatalf("LOCAL query of a paused index: %v, %v", q, err)
	}
	start := time.Now()
	_, err = own.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", PositionsOnly: true}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition || !strings.Contains(ce.Message(), "paused") {
		t.Fatalf("LINEARIZABLE query of a paused index: %v, want FAILED_PRECONDITION naming the paused state", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the refusal waited %v (the read wait), not at once", waited)
	}
	if _, err := own.indexes.Resume(ctx, connect.NewRequest(&skaldv1.IndexesResumeRequest{Name: "amount"})); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if q, err := own.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", PositionsOnly: true})); err != nil || len(q.Msg.Hits) != 9 {
		t.Fatalf("LINEARIZABLE query after the resume: %v, %v", q, err)
	}
	testutil.Eventually(t, 20*time.Second, "the listing to show the index healthy again", func() bool {
		list, err := own.indexes.List(ctx, connect.NewRequest(&skaldv1.IndexesListRequest{}))
		return err == nil && list.Msg.Indexes[0].Status.State == skaldv1.IndexState_INDEX_STATE_HEALTHY && !list.Msg.Indexes[0].Status.Paused
	})
	for _, tc := range []struct {
		name string
		call func() error
		code connect.Code
	}{
		{"pause unknown", func() error {
			_, err := own.indexes.Pause(ctx, connect.NewRequest(&skaldv1.IndexesPauseRequest{Name: "nope"}))
			return err
		}, connect.CodeNotFound},
		{"resume bad name", func() error {
			_, err := own.indexes.Resume(ctx, connect.NewRequest(&skaldv1.IndexesResumeRequest{Name: ""}))
			return err
		}, connect.CodeInvalidArgument},
		{"another namespace", func() error {
			_, err := own.indexes.Pause(ctx, connect.NewRequest(&skaldv1.IndexesPauseRequest{Namespace: "other", Name: "amount"}))
			return err
		}, connect.CodePermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); connect.CodeOf(err) != tc.code {
				t.Fatalf("error %v, want %v", err, tc.code)
			}
		})
	}
	if list, err := own.indexes.List(ctx, connect.NewRequest(&skaldv1.IndexesListRequest{})); err != nil || list.Msg.Indexes[0].Status.Paused {
		t.Fatalf("the refusals changed the index: %v, %v", list, err)
	}
}

// TestIndexesMemoryStorage creates a memory index through Connect: the
// definition keeps its storage, the status counts its memory, queries
// answer as from Pebble, and an unknown storage is refused naming it.
func TestIndexesMemoryStorage(t *testing.T) {
	t.Parallel()
	s := single(t)
	ctx := ctxT(t)
	admin := newClients(s, protocols[0], adminToken)
	created, err := admin.namespaces.Create(ctx, connect.NewRequest(&skaldv1.CreateRequest{Name: "shop"}))
	if err != nil {
		t.Fatal(err)
	}
	own := newClients(s, protocols[0], created.Msg.Token)
	for i := range 6 {
		if _, err := own.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("acct-%d", i%3),
			Messages: []*skaldv1.NewMessage{{Type: "T", Data: fmt.Appendf(nil, `{"amount":%d}`, i%2)}}})); err != nil {
			t.Fatal(err)
		}
	}
	d := amountDefinition()
	d.Storage = skaldv1.IndexStorage_INDEX_STORAGE_MEMORY
	res, err := own.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: d}))
	if err != nil || res.Msg.Definition.Storage != skaldv1.IndexStorage_INDEX_STORAGE_MEMORY {
		t.Fatalf("create: %v, %v", res, err)
	}
	q, err := own.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", Equal: []string{"1"}, PositionsOnly: true}))
	if err != nil || len(q.Msg.Hits) != 3 || q.Msg.Hits[0].GlobalPosition != 2 || q.Msg.Status.GetMemoryBytes() <= 0 {
		t.Fatalf("query of a memory index: %v, %v", q, err)
	}
	bad := amountDefinition()
	bad.Name, bad.Storage = "bad", skaldv1.IndexStorage(9)
	_, err = own.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: bad}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), "definition.storage") {
		t.Fatalf("unknown storage: %v, want INVALID_ARGUMENT naming definition.storage", err)
	}
}
