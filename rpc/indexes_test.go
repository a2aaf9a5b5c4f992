package rpc

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/internal/testutil"
)

func amountDefinition() *skaldv1.IndexDefinition {
	return &skaldv1.IndexDefinition{Name: "amount", Version: 1, Category: "acct", Fields: []*skaldv1.IndexField{
		{Source: skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, Pointer: "/amount", Type: skaldv1.IndexFieldType_INDEX_FIELD_TYPE_INT},
	}}
}

// TestIndexesAPI creates, lists, queries and deletes an index with a
// namespace token on every protocol, checks that another namespace's
// token is refused, and that bad input is refused naming its field and
// changes nothing.
func TestIndexesAPI(t *testing.T) {
	t.Parallel()
	s := single(t)
	ctx := ctxT(t)
	admin := newClients(s, protocols[0], adminToken)
	var tokens []string
	for _, name := range []string{"shop", "other"} {
		created, err := admin.namespaces.Create(ctx, connect.NewRequest(&skaldv1.CreateRequest{Name: name}))
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, created.Msg.Token)
	}
	own := newClients(s, protocols[0], tokens[0])
	for i := range 10 {
		data := fmt.Appendf(nil, `{"amount":%d}`, i*10-20)
		if _, err := own.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("acct-%d", i%3),
			Messages: []*skaldv1.NewMessage{{Type: "T", Data: data}}})); err != nil {
			t.Fatal(err)
		}
	}
	created, err := own.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: amountDefinition()}))
	if err != nil || created.Msg.Index == 0 || created.Msg.Definition.GetCreated() == nil {
		t.Fatalf("create: %v, %v", created, err)
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := newClients(s, p, tokens[0])
			r, err := c.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount",
				From: &skaldv1.IndexBound{Value: "-5"}, To: &skaldv1.IndexBound{Value: "30", Exclusive: true}, Limit: 2}))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range r.Msg.Hits {
				got = append(got, fmt.Sprintf("%d=%s/%s", h.GlobalPosition, h.Values[0], h.GetMessage().GetStream()))
			}
			if fmt.Sprint(got) != "[3=0/acct-2 4=10/acct-0]" || len(r.Msg.NextCursor) == 0 || r.Msg.Status.GetEntries() != 10 || r.Msg.Status.GetLagEvents() != 0 {
				t.Fatalf("first page %v, cursor %x, status %v", got, r.Msg.NextCursor, r.Msg.Status)
			}
			r, err = c.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount",
				From: &skaldv1.IndexBound{Value: "-5"}, To: &skaldv1.IndexBound{Value: "30", Exclusive: true}, Limit: 2, Cursor: r.Msg.NextCursor, PositionsOnly: true}))
			if err != nil || len(r.Msg.Hits) != 1 || r.Msg.Hits[0].GlobalPosition != 5 || r.Msg.Hits[0].Message != nil || len(r.Msg.NextCursor) != 0 {
				t.Fatalf("second page %v, %v", r, err)
			}
			r, err = c.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", Equal: []string{"-20"},
				Read: &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LOCAL}}))
			if err != nil || len(r.Msg.Hits) != 1 || r.Msg.Hits[0].GlobalPosition != 1 {
				t.Fatalf("local equality: %v, %v", r, err)
			}
		})
	}
	list, err := own.indexes.List(ctx, connect.NewRequest(&skaldv1.IndexesListRequest{}))
	if err != nil || len(list.Msg.Indexes) != 1 || list.Msg.Indexes[0].Definition.Name != "amount" || list.Msg.Indexes[0].Status.Checkpoint != 10 ||
		list.Msg.Indexes[0].Status.State != skaldv1.IndexState_INDEX_STATE_HEALTHY || list.Msg.Indexes[0].Status.Progress != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	if info, err := admin.indexes.Info(ctx, connect.NewRequest(&skaldv1.IndexesInfoRequest{Namespace: "shop", Name: "amount"})); err != nil || info.Msg.Index.Status.Entries != 10 {
		t.Fatalf("info with the admin token: %v, %v", info, err)
	}

	other := newClients(s, protocols[0], tokens[1])
	bad := amountDefinition()
	bad.Fields[0].Pointer = "amount"
	badQuery := amountDefinition()
	badQuery.Query = &skaldv1.Query{}
	for _, tc := range []struct {
		name  string
		call  func() error
		code  connect.Code
		field string
	}{
		{"another namespace's token", func() error {
			_, err := other.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Namespace: "shop", Name: "amount"}))
			return err
		}, connect.CodePermissionDenied, ""},
		{"another namespace's token creates", func() error {
			_, err := other.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Namespace: "shop", Definition: amountDefinition()}))
			return err
		}, connect.CodePermissionDenied, ""},
		{"bad pointer", func() error {
			_, err := own.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: bad}))
			return err
		}, connect.CodeInvalidArgument, "definition.fields[0].pointer"},
		{"bad query", func() error {
			_, err := own.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: badQuery}))
			return err
		}, connect.CodeInvalidArgument, "definition.query.items"},
		{"exists", func() error {
			_, err := own.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: amountDefinition()}))
			return err
		}, connect.CodeAlreadyExists, ""},
		{"unknown index", func() error {
			_, err := own.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "nope"}))
			return err
		}, connect.CodeNotFound, ""},
		{"value of another type", func() error {
			_, err := own.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", Equal: []string{"ten"}}))
			return err
		}, connect.CodeInvalidArgument, "equal[0]"},
		{"limit", func() error {
			_, err := own.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", Limit: 1001}))
			return err
		}, connect.CodeInvalidArgument, "limit"},
		{"foreign cursor", func() error {
			_, err := own.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", Cursor: []byte("nope")}))
			return err
		}, connect.CodeInvalidArgument, "cursor"},
		{"delete unknown", func() error {
			_, err := own.indexes.Delete(ctx, connect.NewRequest(&skaldv1.IndexesDeleteRequest{Name: "nope"}))
			return err
		}, connect.CodeNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != tc.code {
				t.Fatalf("error %v, want %v", err, tc.code)
			}
			if tc.field != "" {
				var field string
				for _, d := range ce.Details() {
					if v, err := d.Value(); err == nil {
						if br, ok := v.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 {
							field = br.FieldViolations[0].Field
						}
					}
				}
				if field != tc.field {
					t.Fatalf("field violation %q, want %q (%v)", field, tc.field, err)
				}
			}
		})
	}
	if list, err := own.indexes.List(ctx, connect.NewRequest(&skaldv1.IndexesListRequest{})); err != nil || len(list.Msg.Indexes) != 1 {
		t.Fatalf("the refusals changed the indexes: %v, %v", list, err)
	}
	if _, err := own.indexes.Delete(ctx, connect.NewRequest(&skaldv1.IndexesDeleteRequest{Name: "amount"})); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if list, err := own.indexes.List(ctx, connect.NewRequest(&skaldv1.IndexesListRequest{})); err != nil || len(list.Msg.Indexes) != 0 {
		t.Fatalf("after delete: %v, %v", list, err)
	}
}

// A stream index answers each stream once, from its latest event, and
// names the stream with positions only; its kind is reported back.
func TestIndexesAPIStreamKind(t *testing.T) {
	t.Parallel()
	s := single(t)
	ctx := ctxT(t)
	admin := newClients(s, protocols[0], adminToken)
	created, err := admin.namespaces.Create(ctx, connect.NewRequest(&skaldv1.CreateRequest{Name: "shop"}))
	if err != nil {
		t.Fatal(err)
	}
	own := newClients(s, protocols[0], created.Msg.Token)
	for i := range 10 {
		data := fmt.Appendf(nil, `{"amount":%d}`, i*10-20)
		if _, err := own.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("acct-%d", i%3),
			Messages: []*skaldv1.NewMessage{{Type: "T", Data: data}}})); err != nil {
			t.Fatal(err)
		}
	}
	d := amountDefinition()
	d.Name, d.Kind = "latest", skaldv1.IndexKind_INDEX_KIND_STREAM
	res, err := own.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: d}))
	if err != nil || res.Msg.Definition.Kind != skaldv1.IndexKind_INDEX_KIND_STREAM {
		t.Fatalf("create: %v, %v", res, err)
	}
	for _, tc := range []struct {
		name string
		req  *skaldv1.IndexesQueryRequest
		want string
	}{
		{"every stream", &skaldv1.IndexesQueryRequest{Name: "latest", PositionsOnly: true}, "[8=50/acct-1 9=60/acct-2 10=70/acct-0]"},
		{"range, descending", &skaldv1.IndexesQueryRequest{Name: "latest", From: &skaldv1.IndexBound{Value: "55"}, Descending: true}, "[10=70/acct-0 9=60/acct-2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := own.indexes.Query(ctx, connect.NewRequest(tc.req))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range r.Msg.Hits {
				if m := h.GetMessage(); m != nil && m.Stream != h.Stream {
					t.Fatalf("hit %d names stream %q, its event is of %q", h.GlobalPosition, h.Stream, m.Stream)
				}
				got = append(got, fmt.Sprintf("%d=%s/%s", h.GlobalPosition, h.Values[0], h.Stream))
			}
			if fmt.Sprint(got) != tc.want || r.Msg.Status.GetEntries() != 3 {
				t.Fatalf("hits %v, want %s; status %v", got, tc.want, r.Msg.Status)
			}
		})
	}
}

// Rebuild builds an index again under a new version; the listing shows
// the rebuild while it runs and the new version once built; bad rebuilds
// are refused naming their field and change nothing.
func TestIndexesRebuild(t *testing.T) {
	t.Parallel()
	s := single(t)
	ctx := ctxT(t)
	admin := newClients(s, protocols[0], adminToken)
	created, err := admin.namespaces.Create(ctx, connect.NewRequest(&skaldv1.CreateRequest{Name: "shop"}))
	if err != nil {
		t.Fatal(err)
	}
	own := newClients(s, protocols[0], created.Msg.Token)
	for i := range 10 {
		if _, err := own.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("acct-%d", i%3),
			Messages: []*skaldv1.NewMessage{{Type: "T", Data: fmt.Appendf(nil, `{"amount":%d}`, i)}}})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := own.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: amountDefinition()})); err != nil {
		t.Fatal(err)
	}
	v2 := amountDefinition()
	v2.Version, v2.Kind = 2, skaldv1.IndexKind_INDEX_KIND_STREAM
	res, err := own.indexes.Rebuild(ctx, connect.NewRequest(&skaldv1.IndexesRebuildRequest{Name: "amount", Definition: v2}))
	if err != nil || res.Msg.Index == 0 || res.Msg.Definition.Version != 2 || res.Msg.Definition.Kind != skaldv1.IndexKind_INDEX_KIND_STREAM {
		t.Fatalf("rebuild: %v, %v", res, err)
	}
	// A query at LINEARIZABLE answers from one version or the other, and
	// holds every event either way: 10 entries (v1) or 3 streams (v2).
	q, err := own.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", PositionsOnly: true}))
	if err != nil || (len(q.Msg.Hits) != 10 && len(q.Msg.Hits) != 3) {
		t.Fatalf("query during the rebuild: %v, %v", q, err)
	}
	testutil.Eventually(t, 20*time.Second, "the listing to show version 2", func() bool {
		list, err := own.indexes.List(ctx, connect.NewRequest(&skaldv1.IndexesListRequest{}))
		return err == nil && len(list.Msg.Indexes) == 1 && list.Msg.Indexes[0].Definition.Version == 2 &&
			list.Msg.Indexes[0].Rebuilding == nil && list.Msg.Indexes[0].Status.Entries == 3
	})
	q, err = own.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", PositionsOnly: true}))
	if err != nil || len(q.Msg.Hits) != 3 || q.Msg.Hits[0].Stream == "" {
		t.Fatalf("query of version 2: %v, %v", q, err)
	}
	renamed := amountDefinition()
	renamed.Name = "other"
	for _, tc := range []struct {
		name  string
		req   *skaldv1.IndexesRebuildRequest
		code  connect.Code
		field string
	}{
		{"another name", &skaldv1.IndexesRebuildRequest{Name: "amount", Definition: renamed}, connect.CodeInvalidArgument, "definition.name"},
		{"bad definition", &skaldv1.IndexesRebuildRequest{Name: "amount", Definition: &skaldv1.IndexDefinition{Name: "amount", Category: "acct"}}, connect.CodeInvalidArgument, "definition.fields"},
		{"unknown index", &skaldv1.IndexesRebuildRequest{Name: "nope"}, connect.CodeNotFound, ""},
		{"bad name", &skaldv1.IndexesRebuildRequest{Name: ""}, connect.CodeInvalidArgument, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := own.indexes.Rebuild(ctx, connect.NewRequest(tc.req))
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != tc.code {
				t.Fatalf("error %v, want %v", err, tc.code)
			}
			if tc.field != "" {
				var field string
				for _, d := range ce.Details() {
					if v, err := d.Value(); err == nil {
						if br, ok := v.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 {
							field = br.FieldViolations[0].Field
						}
					}
				}
				if field != tc.field {
					t.Fatalf("field violation %q, want %q (%v)", field, tc.field, err)
				}
			}
		})
	}
	if list, err := own.indexes.List(ctx, connect.NewRequest(&skaldv1.IndexesListRequest{})); err != nil || list.Msg.Indexes[0].Definition.Version != 2 || list.Msg.Indexes[0].Rebuilding != nil {
		t.Fatalf("the refusals changed the index: %v, %v", list, err)
	}
}

// An index query spends the server's scan budget on the entries of
// removed messages its index still holds (the loop has not applied the
// removal yet: its interval here is an hour, and LOCAL reads do not kick
// it): past the budget the reply is truncated with next_cursor, never an
// error, and going on from the cursors returns exactly the live hits.
func TestIndexQueryScanBudget(t *testing.T) {
	t.Parallel()
	const budget = 10
	s := singleIndexBudget(t, budget)
	ctx := ctxT(t)
	created, err := newClients(s, protocols[0], adminToken).namespaces.Create(ctx, connect.NewRequest(&skaldv1.CreateRequest{Name: "shop"}))
	if err != nil {
		t.Fatal(err)
	}
	cl := newClients(s, protocols[0], created.Msg.Token)
	if _, err := cl.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: amountDefinition()})); err != nil {
		t.Fatal(err)
	}
	var live []int64
	for i := range 35 {
		stream := "acct-1" // amounts 0..29: first in the index, then removed
		if i >= 30 {
			stream = "acct-2"
		}
		r, err := cl.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: stream,
			Messages: []*skaldv1.NewMessage{{Type: "T", Data: fmt.Appendf(nil, `{"amount":%d}`, i)}}}))
		if err != nil {
			t.Fatal(err)
		}
		if i >= 30 {
			live = append(live, r.Msg.FirstGlobalPosition)
		}
	}
	// A LINEARIZABLE query kicks the loop: every append is indexed.
	if r, err := cl.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", Limit: 100, PositionsOnly: true})); err != nil || len(r.Msg.Hits) != 35 {
		t.Fatalf("linearizable query before the truncate: %v, %v", r, err)
	}
	if _, err := cl.events.TruncateStream(ctx, connect.NewRequest(&skaldv1.TruncateStreamRequest{Stream: "acct-1", Before: 30})); err != nil {
		t.Fatal(err)
	}
	local := &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LOCAL}
	var (
		got    []int64
		pages  []int
		cursor []byte
	)
	for i := 0; ; i++ {
		r, err := cl.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "amount", Limit: 100, Cursor: cursor, Read: local}))
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		pages = append(pages, len(r.Msg.Hits))
		for _, h := range r.Msg.Hits {
			got = append(got, h.GlobalPosition)
		}
		if r.Msg.Truncated != (len(r.Msg.NextCursor) > 0) {
			t.Fatalf("page %d: truncated %v with cursor %x", i, r.Msg.Truncated, r.Msg.NextCursor)
		}
		if cursor = r.Msg.NextCursor; len(cursor) == 0 {
			break
		}
		if i > 100 {
			t.Fatal("pages never end")
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(live) || fmt.Sprint(pages) != "[0 0 0 5]" {
		t.Fatalf("pages of %v hits, %v; want [0 0 0 5], %v", pages, got, live)
	}
}
