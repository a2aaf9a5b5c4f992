package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// scopeSourcesSetup starts a node with namespace app holding two
// messages of invoice-1 and one of order-1 (data {"amount":N}, type
// Billed), an index and a group over each of the two categories, an index
// over the type Billed alone, an index over invoice rebuilt over order,
// and a reader credential scoped to invoice.
// It returns the app owner's token and the scoped reader's.
func scopeSourcesSetup(t *testing.T) (s *server, owner, scoped string) {
	t.Helper()
	s = single(t)
	ctx := ctxT(t)
	created, err := newClients(s, protocols[0], adminToken).namespaces.Create(ctx,
		connect.NewRequest(&skaldv1.CreateRequest{Name: "app"}))
	if err != nil {
		t.Fatal(err)
	}
	owner = created.Msg.Token
	own := newClients(s, protocols[0], owner)
	for _, m := range []struct {
		stream string
		amount int
	}{{"invoice-1", 10}, {"order-1", 99}, {"invoice-1", 20}} {
		if _, err := own.events.Append(ctx, connect.NewRequest(&skaldv1.AppendRequest{Stream: m.stream,
			Messages: []*skaldv1.NewMessage{{Type: "Billed", Data: fmt.Appendf(nil, `{"amount":%d}`, m.amount)}}})); err != nil {
			t.Fatal(err)
		}
	}
	amount := []*skaldv1.IndexField{{Source: skaldv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, Pointer: "/amount",
		Type: skaldv1.IndexFieldType_INDEX_FIELD_TYPE_INT}}
	for _, d := range []*skaldv1.IndexDefinition{
		{Name: "invoice-amount", Version: 1, Category: "invoice", Fields: amount},
		{Name: "order-amount", Version: 1, Category: "order", Fields: amount},
		{Name: "billed-amount", Version: 1, Types: []string{"Billed"}, Fields: amount},
		{Name: "moved", Version: 1, Category: "invoice", Fields: amount},
	} {
		if _, err := own.indexes.Create(ctx, connect.NewRequest(&skaldv1.IndexesCreateRequest{Definition: d})); err != nil {
			t.Fatalf("create index %s: %v", d.Name, err)
		}
	}
	// An index over invoice rebuilt over order: out of scope whichever
	// definition answers.
	moved := &skaldv1.IndexDefinition{Name: "moved", Version: 2, Category: "order", Fields: amount}
	if _, err := own.indexes.Rebuild(ctx, connect.NewRequest(&skaldv1.IndexesRebuildRequest{Name: "moved",
		Definition: moved})); err != nil {
		t.Fatalf("rebuild index moved: %v", err)
	}
	for _, category := range []string{"invoice", "order"} {
		createGroup(t, own, &skaldv1.CreateGroupRequest{Name: category + "-g",
			Source: &skaldv1.CreateGroupRequest_Category{Category: category}})
	}
	return s, owner, createCredential(t, s, owner, "billing", fsm.RoleReader, true)
}

// firstDelivery consumes group and returns the first message delivered
// (heartbeats skipped), after settle (nil: none) ran on it while the
// consumer still holds it, or the error that ended the stream.
func firstDelivery(ctx context.Context, c clients, group string, settle func(*skaldv1.Delivery) error) (
	*skaldv1.Delivery, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := c.subs.Consume(ctx, connect.NewRequest(&skaldv1.ConsumeRequest{Group: group, Consumer: "test"}))
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	for stream.Receive() {
		if d := stream.Msg().GetDelivery(); d != nil {
			if settle == nil {
				return d, nil
			}
			return d, settle(d)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("the stream ended without a delivery")
}

// A credential scoped to the category invoice reads what an index or a
// group over invoice holds, and is refused, naming the scope and what it
// lacks, an index or group over another category or over every category
// (types alone), and every DCB query: a query's items name types and
// tags, never a category. Namespaces.Get {} answers the caller's own
// namespace.
func TestScopedSources(t *testing.T) {
	t.Parallel()
	s, owner, scopedToken := scopeSourcesSetup(t)
	ctx := ctxT(t)
	scoped := newClients(s, protocols[0], scopedToken)
	cases := []struct {
		name string
		c    clients
		call func(c clients) (string, error)
		want string // the answer, or the error's message must contain it
		code connect.Code
	}{
		{"index over the scope's category", scoped, func(c clients) (string, error) {
			r, err := c.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "invoice-amount"}))
			if err != nil {
				return "", err
			}
			var hits []string
			for _, h := range r.Msg.Hits {
				hits = append(hits, fmt.Sprintf("%s@%d=%s", h.GetMessage().GetStream(), h.GlobalPosition,
					strings.Join(h.Values, ",")))
			}
			return strings.Join(hits, " "), nil
		}, "invoice-1@1=10 invoice-1@3=20", 0},
		{"index info over the scope's category", scoped, func(c clients) (string, error) {
			r, err := c.indexes.Info(ctx, connect.NewRequest(&skaldv1.IndexesInfoRequest{Name: "invoice-amount"}))
			if err != nil {
				return "", err
			}
			return r.Msg.GetIndex().GetDefinition().GetCategory(), nil
		}, "invoice", 0},
		{"index over another category", scoped, func(c clients) (string, error) {
			_, err := c.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "order-amount"}))
			return "", err
		}, `scope invoice) of namespace "app" may not call skald.v1.Indexes/Query on index "order-amount": ` +
			`it holds the category "order", and the scope has no entry "order"`, connect.CodePermissionDenied},
		{"index over a type in every category", scoped, func(c clients) (string, error) {
			_, err := c.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "billed-amount"}))
			return "", err
		}, `on index "billed-amount": it selects messages of every category (by type, tag or all of them), ` +
			`beyond the scope invoice`, connect.CodePermissionDenied},
		{"index rebuilt over another category", scoped, func(c clients) (string, error) {
			_, err := c.indexes.Query(ctx, connect.NewRequest(&skaldv1.IndexesQueryRequest{Name: "moved"}))
			return "", err
		}, `on index "moved": it holds the category "order", and the scope has no entry "order"`,
			connect.CodePermissionDenied},
		{"index info over another category", scoped, func(c clients) (string, error) {
			_, err := c.indexes.Info(ctx, connect.NewRequest(&skaldv1.IndexesInfoRequest{Name: "order-amount"}))
			return "", err
		}, `the scope has no entry "order"`, connect.CodePermissionDenied},
		{"query of a type only the scope's category holds", scoped, func(c clients) (string, error) {
			_, err := c.events.Query(ctx, connect.NewRequest(&skaldv1.QueryRequest{
				Query: &skaldv1.Query{Items: []*skaldv1.QueryItem{{Types: []string{"Billed"}}}}}))
			return "", err
		}, `may not call skald.v1.EventStore/Query: its query selects by type and tag in every category, ` +
			`beyond the scope invoice`, connect.CodePermissionDenied},
		{"query by the owner", newClients(s, protocols[0], owner), func(c clients) (string, error) {
			r, err := c.events.Query(ctx, connect.NewRequest(&skaldv1.QueryRequest{
				Query: &skaldv1.Query{Items: []*skaldv1.QueryItem{{Types: []string{"Billed"}}}}}))
			if err != nil {
				return "", err
			}
			return fmt.Sprint(len(r.Msg.GetMessages())), nil
		}, "3", 0},
		{"consume a group over the scope's category", scoped, func(c clients) (string, error) {
			d, err := firstDelivery(ctx, c, "invoice-g", func(d *skaldv1.Delivery) error {
				_, err := c.subs.Ack(ctx, connect.NewRequest(&skaldv1.AckRequest{Group: "invoice-g",
					Ids: []string{d.Message.Id}}))
				return err
			})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s/%d %s", d.Message.Stream, d.Message.Position, d.Message.Data), nil
		}, `invoice-1/0 {"amount":10}`, 0},
		{"get a group over the scope's category", scoped, func(c clients) (string, error) {
			r, err := c.subs.GetGroup(ctx, connect.NewRequest(&skaldv1.GetGroupRequest{Name: "invoice-g"}))
			if err != nil {
				return "", err
			}
			return r.Msg.GetGroup().GetCategory(), nil
		}, "invoice", 0},
		{"consume a group over another category", scoped, func(c clients) (string, error) {
			_, err := firstDelivery(ctx, c, "order-g", nil)
			return "", err
		}, `may not call skald.v1.Subscriptions/Consume on group "order-g": it holds the category "order", ` +
			`and the scope has no entry "order"`, connect.CodePermissionDenied},
		{"ack in a group over another category", scoped, func(c clients) (string, error) {
			_, err := c.subs.Ack(ctx, connect.NewRequest(&skaldv1.AckRequest{Group: "order-g", Ids: []string{"x"}}))
			return "", err
		}, `on group "order-g": it holds the category "order"`, connect.CodePermissionDenied},
		{"nack in a group over another category", scoped, func(c clients) (string, error) {
			_, err := c.subs.Nack(ctx, connect.NewRequest(&skaldv1.NackRequest{Group: "order-g", Ids: []string{"x"}}))
			return "", err
		}, `on group "order-g": it holds the category "order"`, connect.CodePermissionDenied},
		{"get a group over another category", scoped, func(c clients) (string, error) {
			_, err := c.subs.GetGroup(ctx, connect.NewRequest(&skaldv1.GetGroupRequest{Name: "order-g"}))
			return "", err
		}, `on group "order-g": it holds the category "order"`, connect.CodePermissionDenied},
		{"own namespace by its owner", newClients(s, protocols[0], owner), func(c clients) (string, error) {
			r, err := c.namespaces.Get(ctx, connect.NewRequest(&skaldv1.GetRequest{}))
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s %d", r.Msg.GetName(), r.Msg.GetMessageCount()), nil
		}, "app 3", 0},
		{"own namespace by a scoped reader", scoped, func(c clients) (string, error) {
			r, err := c.namespaces.Get(ctx, connect.NewRequest(&skaldv1.GetRequest{}))
			if err != nil {
				return "", err
			}
			return r.Msg.GetName(), nil
		}, "app", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.call(c.c)
			switch {
			case c.code == 0 && err != nil:
				t.Fatalf("got %v, want %q", err, c.want)
			case c.code == 0 && got != c.want:
				t.Fatalf("got %q, want %q", got, c.want)
			case c.code != 0 && (connect.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %q, %v; want %v containing %q", got, err, c.code, c.want)
			}
		})
	}
}

// The rule alone: an index or a group is within a scope only when a
// category or a stream the scope grants bounds every message it can hold,
// a rebuild's definition included.
func TestSourceScopeRule(t *testing.T) {
	t.Parallel()
	index := func(category string, types ...string) *fsmv1.IndexDefinition {
		return &fsmv1.IndexDefinition{Category: category, Types: types}
	}
	group := func(src *fsmv1.GroupSource) *fsmv1.GroupRecord { return &fsmv1.GroupRecord{Name: "g", Source: src} }
	cases := []struct {
		name  string
		scope []string
		info  fsm.IndexInfo      // an index, when group is nil
		group *fsmv1.GroupRecord // else a group
		want  string             // "" allowed, else in the refusal
	}{
		{"index over a listed category", []string{"invoice"}, fsm.IndexInfo{Definition: index("invoice", "Billed")}, nil, ""},
		{"index over a category a prefix covers", []string{"inv*"}, fsm.IndexInfo{Definition: index("invoice")}, nil, ""},
		{"index over a category a stream prefix does not cover", []string{"invoice-*"},
			fsm.IndexInfo{Definition: index("invoice")}, nil, `the scope has no entry "invoice"`},
		{"index over another category", []string{"invoice"}, fsm.IndexInfo{Definition: index("order")}, nil,
			`it holds the category "order"`},
		{"index over types alone", []string{"invoice"}, fsm.IndexInfo{Definition: index("", "Billed")}, nil,
			"every category"},
		{"index rebuilt over another category", []string{"invoice"}, fsm.IndexInfo{Definition: index("invoice"),
			Rebuilding: &fsm.IndexInfo{Definition: index("order")}}, nil, `it holds the category "order"`},
		{"index rebuilt within the scope", []string{"invoice", "order"}, fsm.IndexInfo{Definition: index("invoice"),
			Rebuilding: &fsm.IndexInfo{Definition: index("order")}}, nil, ""},
		{"unscoped, index over types", nil, fsm.IndexInfo{Definition: index("", "Billed")}, nil, ""},
		{"group over a listed category", []string{"invoice"}, fsm.IndexInfo{},
			group(&fsmv1.GroupSource{Category: "invoice"}), ""},
		{"group over a stream a prefix covers", []string{"invoice-*"}, fsm.IndexInfo{},
			group(&fsmv1.GroupSource{Stream: "invoice-1"}), ""},
		{"group over a stream outside", []string{"invoice"}, fsm.IndexInfo{},
			group(&fsmv1.GroupSource{Stream: "order-1"}), `its source is the stream "order-1"`},
		{"group over another category", []string{"invoice"}, fsm.IndexInfo{},
			group(&fsmv1.GroupSource{Category: "order"}), `it holds the category "order"`},
		{"group over every stream", []string{"invoice"}, fsm.IndexInfo{}, group(&fsmv1.GroupSource{}), "every category"},
		{"group over a query", []string{"invoice"}, fsm.IndexInfo{}, group(&fsmv1.GroupSource{
			Query: &fsmv1.Query{Items: []*fsmv1.QueryItem{{Types: []string{"Billed"}}}}}), "every category"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			who := caller{namespace: "app", home: "app", credential: "billing", role: fsm.RoleReader, scope: c.scope}
			var err error
			if c.group != nil {
				err = groupInScope(who, "m", c.group)
			} else {
				err = indexInScope(who, "m", "i", c.info)
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want PermissionDenied containing %q", err, c.want)
			}
		})
	}
}
