package rpc

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// A read whose filter matches rarely stops at the server's scan budget:
// the reply is short (here empty), truncated, and carries resume_from;
// reading on from it call after call returns exactly the matches. A
// subscription over the same sparse category delivers every match and
// then caught_up, moving on in steps of the budget.
func TestScanBudget(t *testing.T) {
	t.Parallel()
	const budget = 25
	s := singleWith(t, Options{Subscribe: defaultOptions.Subscribe, Limits: Limits{ScanBudget: budget}})
	c := newClients(s, protocols[1], adminToken)
	var rare []int64
	for i := range 200 {
		meta := ""
		if i%50 == 30 {
			meta = `{"correlationStreamName":"billing-1"}`
		}
		r, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("acct-%d", i%4),
			Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`), Metadata: []byte(meta)}}}))
		if err != nil {
			t.Fatal(err)
		}
		if meta != "" {
			rare = append(rare, r.Msg.FirstGlobalPosition)
		}
	}

	// The first page: 30 non-matching entries precede the first match.
	first, err := c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "acct", Correlation: "billing", Limit: 10}))
	if err != nil {
		t.Fatal(err)
	}
	if m := first.Msg; len(m.Messages) != 0 || !m.Truncated || m.ResumeFrom == nil || *m.ResumeFrom != budget+1 {
		t.Fatalf("first page: %d messages, truncated %v, resume_from %v; want 0, true, %d", len(m.Messages), m.Truncated, m.ResumeFrom, budget+1)
	}
	var got []int64
	from, calls := int64(1), 0
	for ; ; calls++ {
		if calls > 100 {
			t.Fatalf("no end after %d calls", calls)
		}
		r, err := c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "acct", Correlation: "billing", GlobalPosition: from, Limit: 10}))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Msg.Messages {
			got = append(got, m.GlobalPosition)
		}
		if r.Msg.ResumeFrom == nil {
			if r.Msg.Truncated {
				t.Fatal("truncated without resume_from on a page of small messages")
			}
			break
		}
		from = *r.Msg.ResumeFrom
	}
	if !slices.Equal(got, rare) || calls < 200/budget-1 {
		t.Fatalf("read on in %d calls to %v, want %v in about %d", calls, got, rare, 200/budget)
	}
	// A read that ends within its budget says nothing more.
	last, err := c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "acct", Correlation: "billing", GlobalPosition: rare[len(rare)-1] + 1}))
	if err != nil || last.Msg.Truncated || last.Msg.ResumeFrom != nil || len(last.Msg.Messages) != 0 {
		t.Fatalf("past the last match: %v", err)
	}

	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	st, err := c.events.Subscribe(ctx, connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Category{Category: "acct"}, Correlation: "billing"}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var delivered []int64
	for caughtUp := false; !caughtUp; {
		if !st.Receive() {
			t.Fatalf("stream ended after %v: %v", delivered, st.Err())
		}
		switch ev := st.Msg().Event.(type) {
		case *skaldv1.SubscribeResponse_Message:
			delivered = append(delivered, ev.Message.GlobalPosition)
		case *skaldv1.SubscribeResponse_CaughtUp:
			caughtUp = true
		}
	}
	if !slices.Equal(delivered, rare) {
		t.Fatalf("subscription delivered %v before caught_up, want %v", delivered, rare)
	}
}
