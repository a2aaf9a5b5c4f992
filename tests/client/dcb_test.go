package client_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/tests/testcluster"
)

// TestDCB: tags, Query and conditional appends through the client; a
// conditional append whose answer is lost is retried and answered as a
// duplicate, not as a failed condition (its own first write matches).
func TestDCB(t *testing.T) {
	cl := testcluster.Start(t, 1)
	ctx := ctxT(t)
	c, l := lossyClient(t, cl, cl.CreateNamespace(t, "dcb", 0), 0)
	tagged := func(typ string, tags ...string) client.NewMessage {
		return client.NewMessage{Type: typ, Data: []byte(`{}`), Tags: tags}
	}
	if _, err := c.Append(ctx, "course-c1", []client.NewMessage{tagged("Defined", "course:c1")}); err != nil {
		t.Fatal(err)
	}
	decision := client.Query{{Tags: []string{"course:c1"}}, {Types: []string{"Registered"}, Tags: []string{"student:s1"}}}
	read, err := c.Query(ctx, decision, 0, 0)
	if err != nil || len(read) != 1 || read[0].GlobalPosition != 1 || !reflect.DeepEqual(read[0].Tags, []string{"course:c1"}) {
		t.Fatalf("Query = %+v, %v", read, err)
	}
	after := read[len(read)-1].GlobalPosition

	l.lost.Store(1)
	res, err := c.Append(ctx, "course-c1", []client.NewMessage{tagged("Subscribed", "course:c1", "student:s1")}, client.FailIfMatch(decision, after))
	if err != nil || !res.Duplicate || res.FirstGlobalPosition != 2 {
		t.Fatalf("conditional append with a lost answer: %+v, %v; want the original position 2, duplicate", res, err)
	}
	_, err = c.Append(ctx, "course-c1", []client.NewMessage{tagged("Subscribed", "course:c1", "student:s1")}, client.FailIfMatch(decision, after))
	var cf *client.ConditionFailedError
	if !errors.Is(err, client.ErrConditionFailed) || !errors.As(err, &cf) || cf.GlobalPosition != 2 || cf.After != 1 {
		t.Fatalf("second decider: %v, want ErrConditionFailed at 2", err)
	}
	_, err = c.AppendMulti(ctx, []client.StreamAppend{{Stream: "student-s1", Messages: []client.NewMessage{tagged("Subscribed", "student:s1")}}}, client.FailIfMatch(decision, after))
	if !errors.Is(err, client.ErrConditionFailed) {
		t.Fatalf("AppendMulti: %v, want ErrConditionFailed", err)
	}
	if _, err := c.Append(ctx, "x-1", []client.NewMessage{tagged("T")}, client.FailIfMatch(client.Query{{}}, 0)); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("empty query item: %v, want ErrInvalidArgument", err)
	}
	all, err := c.ReadAll(ctx, 0, -1)
	if err != nil || len(all) != 2 {
		t.Fatalf("namespace holds %d messages (%v), want 2", len(all), err)
	}
}
