package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/skalddb/skald/client"
)

func newClient(t *testing.T, token string) *client.Client {
	t.Helper()
	c, err := client.New(ctxT(t), client.Config{Endpoints: endpoints, Token: token})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestErrors checks that each refusal of the API arrives as its sentinel,
// with the details the API sends.
func TestErrors(t *testing.T) {
	ctx := ctxT(t)
	admin := newClient(t, adminToken)
	ns, err := admin.CreateNamespace(ctx, fmt.Sprintf("errors-test-%d", runs.Add(1)), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, ns.Token)
	msg := []client.NewMessage{{Type: "T", Data: json.RawMessage(`{}`)}}

	t.Run("wrong_expected_version", func(t *testing.T) {
		if _, err := c.Append(ctx, "acct-1", msg); err != nil {
			t.Fatal(err)
		}
		_, err := c.Append(ctx, "acct-1", msg, client.ExpectVersion(5))
		var wrong *client.WrongExpectedVersionError
		if !errors.Is(err, client.ErrWrongExpectedVersion) || !errors.As(err, &wrong) {
			t.Fatalf("got %v, want ErrWrongExpectedVersion", err)
		}
		if wrong.Stream != "acct-1" || wrong.Expected != 5 || wrong.Actual != 0 {
			t.Fatalf("got %+v, want stream acct-1 expected 5 actual 0", *wrong)
		}
		var e *client.Error
		if !errors.As(err, &e) || e.Endpoint == "" {
			t.Fatalf("no *client.Error with the endpoint in %v", err)
		}
	})
	t.Run("invalid_argument", func(t *testing.T) {
		_, err := c.Append(ctx, "acct-1", []client.NewMessage{{Type: "T", Data: json.RawMessage(`[1]`)}})
		var e *client.Error
		if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &e) {
			t.Fatalf("got %v, want ErrInvalidArgument", err)
		}
		if len(e.Fields) != 1 || e.Fields[0].Field != "messages[0].data" {
			t.Fatalf("field violations %+v, want one on messages[0].data", e.Fields)
		}
	})
	t.Run("already_exists", func(t *testing.T) {
		if _, err := admin.CreateNamespace(ctx, ns.Name, "", ""); !errors.Is(err, client.ErrAlreadyExists) {
			t.Fatalf("got %v, want ErrAlreadyExists", err)
		}
	})
	t.Run("not_found", func(t *testing.T) {
		if _, err := admin.GetNamespace(ctx, "no-such-namespace"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("permission_denied", func(t *testing.T) {
		if _, err := c.ListNamespaces(ctx); !errors.Is(err, client.ErrPermissionDenied) {
			t.Fatalf("got %v, want ErrPermissionDenied", err)
		}
	})
	t.Run("unauthenticated_at_new", func(t *testing.T) {
		bad := "ns_ZGVmYXVsdA_1111111111111111111111111111111111111111111111111111111111111111"
		if _, err := client.New(ctx, client.Config{Endpoints: endpoints, Token: bad}); !errors.Is(err, client.ErrUnauthenticated) {
			t.Fatalf("got %v, want ErrUnauthenticated", err)
		}
	})
	t.Run("unavailable_within_deadline", func(t *testing.T) {
		// Nothing listens on port 1: the call gives up when its context
		// ends, as unavailable, and nothing was written.
		dead, err := client.New(ctx, client.Config{Endpoints: []string{"127.0.0.1:1"}, Token: ns.Token})
		if err != nil {
			t.Fatal(err)
		}
		defer dead.Close()
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err = dead.Append(short, "acct-1", msg)
		if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want ErrUnavailable wrapping context.DeadlineExceeded", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		closed := newClient(t, ns.Token)
		closed.Close()
		if _, err := closed.StreamVersion(ctx, "acct-1"); !errors.Is(err, client.ErrClosed) {
			t.Fatalf("got %v, want ErrClosed", err)
		}
	})
}

// TestNamespaceAndClusterCalls runs the admin calls once each.
func TestNamespaceAndClusterCalls(t *testing.T) {
	ctx := ctxT(t)
	admin := newClient(t, adminToken)
	name := fmt.Sprintf("calls-test-%d", runs.Add(1))
	created, err := admin.CreateNamespace(ctx, name, "desc", "")
	if err != nil || created.Name != name || created.Index == 0 || created.CreatedAt.IsZero() {
		t.Fatalf("CreateNamespace = %+v, %v", created, err)
	}
	got, err := admin.GetNamespace(ctx, name)
	if err != nil || got.Name != name || got.Description != "desc" || !got.CreatedAt.Equal(created.CreatedAt) || !got.LastActivity.IsZero() {
		t.Fatalf("GetNamespace = %+v, %v", got, err)
	}
	list, err := admin.ListNamespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, n := range list {
		names[n.Name] = true
	}
	if !names["default"] || !names[name] {
		t.Fatalf("ListNamespaces = %v, want default and %s", names, name)
	}
	if d, err := admin.DeleteNamespace(ctx, name); err != nil || d.Name != name || d.MessagesDeleted != 0 || d.Index == 0 || d.DeletedAt.IsZero() {
		t.Fatalf("DeleteNamespace = %+v, %v", d, err)
	}
	st, err := admin.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 3 || st.LeaderID == "" {
		t.Fatalf("Status = %+v, want 3 servers and a leader", st)
	}
	for _, s := range st.Servers {
		if s.APIAddress == "" || !s.Voter {
			t.Fatalf("server %+v: want an API address and a vote", s)
		}
	}
	if err := admin.RemoveServer(ctx, ""); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("RemoveServer without an id: %v, want ErrInvalidArgument", err)
	}
	// The test cluster runs no gossip, so its members refuse to leave.
	if _, err := admin.Leave(ctx, endpoints[0]); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("Leave without gossip: %v, want ErrInvalidArgument (FailedPrecondition)", err)
	}
}

// TestReads runs each read once and checks what it returns.
func TestReads(t *testing.T) {
	ctx := ctxT(t)
	admin := newClient(t, adminToken)
	ns, err := admin.CreateNamespace(ctx, fmt.Sprintf("reads-test-%d", runs.Add(1)), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, ns.Token)
	for _, s := range []string{"order-1", "order-2", "order-1", "invoice-1"} {
		meta := json.RawMessage(`{"correlationStreamName":"saga-9"}`)
		if _, err := c.Append(ctx, s, []client.NewMessage{{Type: "Placed", Data: json.RawMessage(`{}`), Metadata: meta}}); err != nil {
			t.Fatal(err)
		}
	}
	if all, err := c.ReadAll(ctx, 0, 0); err != nil || len(all) != 4 || all[3].GlobalPosition != 4 {
		t.Fatalf("ReadAll = %d messages, %v", len(all), err)
	}
	cat, err := c.ReadCategory(ctx, client.CategoryQuery{Category: "order", Correlation: "saga"}, client.WithLocal(time.Second))
	if err != nil || len(cat) != 3 || string(cat[0].Metadata) != `{"correlationStreamName":"saga-9"}` {
		t.Fatalf("ReadCategory = %+v, %v", cat, err)
	}
	st, err := c.ReadStream(ctx, client.StreamQuery{Stream: "order-1", Position: 1})
	if err != nil || len(st) != 1 || st[0].Position != 1 || st[0].GlobalPosition != 3 {
		t.Fatalf("ReadStream = %+v, %v", st, err)
	}
	if v, err := c.StreamVersion(ctx, "order-1"); err != nil || v != 1 {
		t.Fatalf("StreamVersion = %d, %v", v, err)
	}
	if _, found, err := c.LastMessage(ctx, "order-9", ""); err != nil || found {
		t.Fatalf("LastMessage of an empty stream: found %v, %v", found, err)
	}
	streams, next, err := c.ListStreams(ctx, "order-", "", 1)
	if err != nil || len(streams) != 1 || streams[0].Stream != "order-1" || streams[0].Version != 1 || next == "" {
		t.Fatalf("ListStreams = %+v next %q, %v", streams, next, err)
	}
	cats, err := c.ListCategories(ctx)
	if err != nil || len(cats) != 2 || cats[1].Category != "order" || cats[1].StreamCount != 2 || cats[1].MessageCount != 3 {
		t.Fatalf("ListCategories = %+v, %v", cats, err)
	}
}

// ListCategories reads on past the server's page of 1000 categories.
func TestListCategoriesReadsOn(t *testing.T) {
	ctx := ctxT(t)
	admin := newClient(t, adminToken)
	ns, err := admin.CreateNamespace(ctx, fmt.Sprintf("cats-test-%d", runs.Add(1)), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, ns.Token)
	const n = 1005
	for start := 0; start < n; start += 100 {
		var parts []client.StreamAppend
		for i := start; i < min(start+100, n); i++ {
			parts = append(parts, client.StreamAppend{Stream: fmt.Sprintf("c%04d-1", i), Messages: []client.NewMessage{{Type: "T", Data: json.RawMessage(`{}`)}}})
		}
		if _, err := c.AppendMulti(ctx, parts); err != nil {
			t.Fatal(err)
		}
	}
	cats, err := c.ListCategories(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cats) != n || cats[0].Category != "c0000" || cats[n-1].Category != fmt.Sprintf("c%04d", n-1) {
		t.Fatalf("ListCategories: %d categories, first %+v; want %d, c0000 .. c%04d", len(cats), cats[0], n, n-1)
	}
}
