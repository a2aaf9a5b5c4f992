package rpc

import (
	"fmt"
	"slices"
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Listing namespaces is paged on both APIs: each page opens its
// namespaces for their counters, so one call holds at most
// MaxNamespacesPage of them. Reading on from next_cursor (Connect) or the
// cursor option (EventoDB) returns every namespace once, in byte order;
// a limit out of range is refused naming it.
func TestNamespaceListingIsPaged(t *testing.T) {
	t.Parallel()
	s := single(t)
	c := newClients(s, protocols[1], adminToken)
	want := []string{"default"}
	for i := range 5 {
		name := fmt.Sprintf("ns-%d", 4-i)
		if _, err := c.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: name})); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	slices.Sort(want)

	var got []string
	pages := 0
	for cursor := ""; ; pages++ {
		r, err := c.namespaces.List(ctxT(t), connect.NewRequest(&skaldv1.ListRequest{Cursor: cursor, Limit: 2}))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Msg.Namespaces) > 2 {
			t.Fatalf("a page of limit 2 holds %d namespaces", len(r.Msg.Namespaces))
		}
		for _, ns := range r.Msg.Namespaces {
			got = append(got, ns.Name)
		}
		if cursor = r.Msg.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) || pages != 2 {
		t.Fatalf("Connect: read %v in %d pages after the first, want %v in 2", got, pages, want)
	}
	all, err := c.namespaces.List(ctxT(t), connect.NewRequest(&skaldv1.ListRequest{}))
	if err != nil || len(all.Msg.Namespaces) != len(want) || all.Msg.NextCursor != "" {
		t.Fatalf("Connect, no limit: %v, %v", all, err)
	}
	for _, bad := range []int32{-1, MaxNamespacesPage + 1} {
		_, err := c.namespaces.List(ctxT(t), connect.NewRequest(&skaldv1.ListRequest{Limit: bad}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("limit %d: %v, want InvalidArgument", bad, err)
		}
	}

	ev := evClient{t: t, addr: s.addr, token: adminToken}
	got = nil
	for cursor := ""; ; {
		var page []struct{ Namespace string }
		ev.ok(&page, "ns.list", map[string]any{"limit": 4, "cursor": cursor})
		for _, ns := range page {
			got = append(got, ns.Namespace)
		}
		if len(page) < 4 {
			break
		}
		cursor = page[len(page)-1].Namespace
	}
	if !slices.Equal(got, want) {
		t.Fatalf("EventoDB: read %v, want %v", got, want)
	}
	ev.fails(400, "INVALID_REQUEST", "ns.list", map[string]any{"limit": 0})
	ev.fails(400, "INVALID_REQUEST", "ns.list", map[string]any{"limit": MaxNamespacesPage + 1})
}
