package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// ListCategories and ns.categories answer in bounded pages: a cursor and
// a limit of at most 1000, a bad limit refused naming it.
func TestListCategoriesPages(t *testing.T) {
	t.Parallel()
	s := single(t)
	c := newClients(s, protocols[0], adminToken)
	for _, stream := range []string{"a-1", "b-1", "c-1"} {
		if _, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: stream,
			Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}})); err != nil {
			t.Fatal(err)
		}
	}
	list := func(cursor string, limit int32) (*skaldv1.ListCategoriesResponse, error) {
		r, err := c.events.ListCategories(ctxT(t), connect.NewRequest(&skaldv1.ListCategoriesRequest{Cursor: cursor, Limit: limit}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	}
	first, err := list("", 2)
	if err != nil || len(first.Categories) != 2 || first.Categories[1].Category != "b" || first.NextCursor != "b" {
		t.Fatalf("first page: %v %v", first, err)
	}
	rest, err := list(first.NextCursor, 2)
	if err != nil || len(rest.Categories) != 1 || rest.Categories[0].Category != "c" || rest.NextCursor != "" {
		t.Fatalf("second page: %v %v", rest, err)
	}
	for _, limit := range []int32{-1, 1001} {
		_, err := list("", limit)
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || ce.Message() != fmt.Sprintf("limit: must be 0 (default 1000) or 1..1000, got %d", limit) {
			t.Errorf("limit %d: %v, want InvalidArgument naming the limit", limit, err)
		}
	}

	ev := evClient{t: t, addr: s.addr, token: adminToken}
	var cats []struct{ Category string }
	ev.ok(&cats, "ns.categories", map[string]any{"limit": 2})
	if len(cats) != 2 || cats[1].Category != "b" {
		t.Fatalf("ns.categories limit 2: %v", cats)
	}
	ev.ok(&cats, "ns.categories", map[string]any{"cursor": "b"})
	if len(cats) != 1 || cats[0].Category != "c" {
		t.Fatalf("ns.categories after b: %v", cats)
	}
	ev.ok(&cats, "ns.categories")
	if len(cats) != 3 {
		t.Fatalf("ns.categories without options (EventoDB's call): %v", cats)
	}
	status, body := ev.call("ns.categories", map[string]any{"limit": 0})
	var reply struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal(body, &reply); status != 400 || reply.Error.Code != "INVALID_REQUEST" || reply.Error.Message != "limit must be 1..1000, got 0" {
		t.Fatalf("ns.categories limit 0: %d %s", status, body)
	}
}
