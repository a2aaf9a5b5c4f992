package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/nstoken"
)

// TestAPI runs the suite over every protocol against a single node and
// against a follower of a 3-node cluster (writes forwarded, reads
// linearizable through the leader's read index).
func TestAPI(t *testing.T) {
	t.Parallel()
	for _, target := range []struct {
		name  string
		start func(testing.TB) *server
	}{{"single", single}, {"follower", followerOfThree}} {
		t.Run(target.name, func(t *testing.T) {
			s := target.start(t)
			for _, p := range protocols {
				t.Run(p.name, func(t *testing.T) { apiSuite(t, s, p) })
			}
		})
	}
}

func wantCode(t *testing.T, what string, err error, code connect.Code) *connect.Error {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != code {
		t.Fatalf("%s: got %v, want code %s", what, err, code)
	}
	return ce
}

func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	ce := wantCode(t, what, err, connect.CodeInvalidArgument)
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if br, ok := v.(*errdetails.BadRequest); derr == nil && ok && len(br.FieldViolations) == 1 && br.FieldViolations[0].Field == field {
			return
		}
	}
	t.Fatalf("%s: no field violation on %q in %v", what, field, ce)
}

func apiSuite(t *testing.T, s *server, p protocol) {
	admin := newClients(s, p, adminToken)
	ns := "ns-" + p.name
	created, err := admin.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: ns, Description: "d"}))
	if err != nil {
		t.Fatal(err)
	}
	if name, err := nstoken.Parse(created.Msg.Token); err != nil || name != ns || created.Msg.CreatedAt == nil || created.Msg.Index == 0 {
		t.Fatalf("create response %+v (%v)", created.Msg, err)
	}
	c := newClients(s, p, created.Msg.Token)

	t.Run("append and read", func(t *testing.T) {
		app, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "account-1", Messages: []*skaldv1.NewMessage{
			{Id: "0192F0C4-0000-7000-8000-000000000001", Type: "Opened", Data: []byte(`{"a":1}`)},
			{Type: "Deposited", Data: []byte(`{"n":5}`), Metadata: []byte(`{"correlationStreamName":"flow-1"}`)},
		}}))
		if err != nil {
			t.Fatal(err)
		}
		if m := app.Msg; m.FirstPosition != 0 || m.LastPosition != 1 || m.FirstGlobalPosition != 1 || m.LastGlobalPosition != 2 || m.Index == 0 {
			t.Fatalf("append response %+v", m)
		}
		if _, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "account-2+x", Messages: []*skaldv1.NewMessage{{Type: "Opened", Data: []byte(`{}`)}}})); err != nil {
			t.Fatal(err)
		}
		// Read your write on any node with the write's index.
		rs, err := c.events.ReadStream(ctxT(t), connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "account-1",
			Read: &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_SESSION, MinIndex: app.Msg.Index}}))
		if err != nil {
			t.Fatal(err)
		}
		msgs := rs.Msg.Messages
		if len(msgs) != 2 || msgs[0].Id != "0192f0c4-0000-7000-8000-000000000001" || string(msgs[1].Data) != `{"n":5}` ||
			msgs[1].Position != 1 || msgs[1].Stream != "account-1" || msgs[0].Time == nil || rs.Msg.AppliedIndex < app.Msg.Index {
			t.Fatalf("read stream %+v", rs.Msg)
		}
		rc, err := c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "account"}))
		if err != nil || len(rc.Msg.Messages) != 3 {
			t.Fatalf("read category: %v %v", rc, err)
		}
		seen := 0
		for m := int64(0); m < 3; m++ {
			g, err := c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "account", ConsumerGroup: &skaldv1.ConsumerGroup{Member: m, Size: 3}}))
			if err != nil {
				t.Fatal(err)
			}
			for _, msg := range g.Msg.Messages {
				if fsm.ConsumerGroupMember(msg.Stream, 3) != m {
					t.Fatalf("member %d got %s", m, msg.Stream)
				}
			}
			seen += len(g.Msg.Messages)
		}
		if seen != 3 {
			t.Fatalf("consumer group members saw %d messages, want 3", seen)
		}
		corr, err := c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "account", Correlation: "flow"}))
		if err != nil || len(corr.Msg.Messages) != 1 || corr.Msg.Messages[0].Type != "Deposited" {
			t.Fatalf("correlation read: %v %v", corr, err)
		}
		all, err := c.events.ReadAll(ctxT(t), connect.NewRequest(&skaldv1.ReadAllRequest{GlobalPosition: 2, Limit: 1}))
		if err != nil || len(all.Msg.Messages) != 1 || all.Msg.Messages[0].GlobalPosition != 2 {
			t.Fatalf("read all: %v %v", all, err)
		}
		last, err := c.events.LastMessage(ctxT(t), connect.NewRequest(&skaldv1.LastMessageRequest{Stream: "account-1", Type: "Opened"}))
		if err != nil || last.Msg.Message == nil || last.Msg.Message.Position != 0 {
			t.Fatalf("last message: %v %v", last, err)
		}
		none, err := c.events.LastMessage(ctxT(t), connect.NewRequest(&skaldv1.LastMessageRequest{Stream: "account-9"}))
		if err != nil || none.Msg.Message != nil {
			t.Fatalf("last message of an empty stream: %v %v", none, err)
		}
		for stream, want := range map[string]int64{"account-1": 1, "account-9": -1} {
			v, err := c.events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: stream}))
			if err != nil || v.Msg.Version != want {
				t.Fatalf("version of %s: %v %v", stream, v, err)
			}
		}
		ls, err := c.events.ListStreams(ctxT(t), connect.NewRequest(&skaldv1.ListStreamsRequest{Prefix: "account", Limit: 1}))
		if err != nil || len(ls.Msg.Streams) != 1 || ls.Msg.Streams[0].Stream != "account-1" || ls.Msg.NextCursor != "account-1" {
			t.Fatalf("list streams: %v %v", ls, err)
		}
		lc, err := c.events.ListCategories(ctxT(t), connect.NewRequest(&skaldv1.ListCategoriesRequest{}))
		if err != nil || len(lc.Msg.Categories) != 1 || lc.Msg.Categories[0].StreamCount != 2 || lc.Msg.Categories[0].MessageCount != 3 {
			t.Fatalf("list categories: %v %v", lc, err)
		}
		info, err := c.namespaces.Get(ctxT(t), connect.NewRequest(&skaldv1.GetRequest{Name: ns}))
		if err != nil || info.Msg.MessageCount != 3 || info.Msg.StreamCount != 2 || info.Msg.Description != "d" || info.Msg.Name != ns {
			t.Fatalf("get own namespace: %v %v", info, err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		one := func(m *skaldv1.NewMessage) *connect.Request[skaldv1.AppendRequest] {
			return connect.NewRequest(&skaldv1.AppendRequest{Stream: "e-1", Messages: []*skaldv1.NewMessage{m}})
		}
		_, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}}))
		wantField(t, "empty stream", err, "stream")
		_, err = c.events.Append(ctxT(t), one(&skaldv1.NewMessage{Type: "T", Data: []byte(`[1]`)}))
		wantField(t, "array data", err, "messages[0].data")
		_, err = c.events.Append(ctxT(t), one(&skaldv1.NewMessage{Type: "T"}))
		wantField(t, "empty data", err, "messages[0].data")
		_, err = c.events.Append(ctxT(t), one(&skaldv1.NewMessage{Type: "T", Data: []byte(`{}`), Metadata: []byte(`1`)}))
		wantField(t, "number metadata", err, "messages[0].metadata")
		_, err = c.events.Append(ctxT(t), one(&skaldv1.NewMessage{Id: "not-a-uuid", Type: "T", Data: []byte(`{}`)}))
		wantField(t, "bad id", err, "messages[0].id")
		_, err = c.events.Append(ctxT(t), one(&skaldv1.NewMessage{Type: "", Data: []byte(`{}`)}))
		wantField(t, "empty type", err, "messages[0].type")
		_, err = c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "e-1"}))
		wantField(t, "no messages", err, "messages")
		big := []byte(`{"x":"` + strings.Repeat("a", 1<<20) + `"}`)
		_, err = c.events.Append(ctxT(t), one(&skaldv1.NewMessage{Type: "T", Data: big}))
		wantField(t, "message over 1 MiB", err, "messages[0].data") // one limit, one error: not retryable
		if !strings.Contains(err.Error(), "at most 1048576 (1 MiB) per message") {
			t.Fatalf("message over 1 MiB: %v does not state the limit", err)
		}
		exp := int64(5)
		_, err = c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: "account-1", ExpectedVersion: &exp, Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}}))
		ce := wantCode(t, "version conflict", err, connect.CodeAborted)
		found := false
		for _, d := range ce.Details() {
			if v, derr := d.Value(); derr == nil {
				if vc, ok := v.(*skaldv1.VersionConflict); ok && vc.ActualVersion == 1 && vc.ExpectedVersion == 5 && vc.Stream == "account-1" {
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("version conflict without its detail: %v", ce)
		}
		_, err = c.events.ReadStream(ctxT(t), connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "s", Limit: 10001}))
		wantField(t, "limit over 10000", err, "limit")
		_, err = c.events.ReadStream(ctxT(t), connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "s", Limit: -2}))
		wantField(t, "limit -2", err, "limit")
		_, err = c.events.ReadStream(ctxT(t), connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "s", Position: -1}))
		wantField(t, "negative position", err, "position")
		_, err = c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "account-1"}))
		wantField(t, "category with dash", err, "category")
		_, err = c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: ""}))
		wantField(t, "empty category", err, "category")
		_, err = c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "account", Correlation: "a-b"}))
		wantField(t, "correlation with dash", err, "correlation")
		_, err = c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "account", ConsumerGroup: &skaldv1.ConsumerGroup{Member: 3, Size: 3}}))
		wantField(t, "member >= size", err, "consumer_group.member")
		_, err = c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "account", ConsumerGroup: &skaldv1.ConsumerGroup{Member: 0, Size: -1}}))
		wantField(t, "negative size", err, "consumer_group.size")
		_, err = c.events.ListStreams(ctxT(t), connect.NewRequest(&skaldv1.ListStreamsRequest{Limit: 1001}))
		wantField(t, "list limit", err, "limit")
		_, err = c.events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "s", Read: &skaldv1.ReadOptions{Consistency: 9}}))
		wantField(t, "unknown consistency", err, "read.consistency")
		// Nothing of the rejected writes landed.
		v, err := c.events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "e-1"}))
		if err != nil || v.Msg.Version != -1 {
			t.Fatalf("rejected appends wrote: %v %v", v, err)
		}
	})

	t.Run("auth", func(t *testing.T) {
		_, err := newClients(s, p, "").events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "s"}))
		wantCode(t, "no token", err, connect.CodeUnauthenticated)
		_, err = newClients(s, p, "garbage").events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "s"}))
		wantCode(t, "malformed token", err, connect.CodeUnauthenticated)
		wrong := created.Msg.Token[:len(created.Msg.Token)-1] + "f"
		if wrong == created.Msg.Token {
			wrong = created.Msg.Token[:len(created.Msg.Token)-1] + "e"
		}
		_, err = newClients(s, p, wrong).events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "s"}))
		wantCode(t, "wrong secret", err, connect.CodeUnauthenticated)
		_, err = c.namespaces.List(ctxT(t), connect.NewRequest(&skaldv1.ListRequest{}))
		wantCode(t, "list with a namespace token", err, connect.CodePermissionDenied)
		_, err = c.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: "x"}))
		wantCode(t, "create with a namespace token", err, connect.CodePermissionDenied)
		_, err = c.namespaces.Get(ctxT(t), connect.NewRequest(&skaldv1.GetRequest{Name: nstoken.AdminNamespace}))
		wantCode(t, "get another namespace", err, connect.CodePermissionDenied)
		if msg := err.Error(); !strings.Contains(msg, `credential "initial" (role owner) of namespace `) || !strings.Contains(msg, "only an admin credential names another namespace") {
			t.Errorf("get another namespace: the refusal names neither the credential nor the way out: %s", msg)
		}
		_, err = c.cluster.Status(ctxT(t), connect.NewRequest(&skaldv1.StatusRequest{}))
		wantCode(t, "cluster status with a namespace token", err, connect.CodePermissionDenied)
		_, err = admin.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: ns}))
		wantCode(t, "create existing", err, connect.CodeAlreadyExists)
		_, err = admin.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: nstoken.AdminNamespace}))
		wantCode(t, "create default", err, connect.CodeAlreadyExists)
		_, err = admin.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: "other", Token: created.Msg.Token}))
		wantField(t, "token of another namespace", err, "token")
		_, err = admin.namespaces.Delete(ctxT(t), connect.NewRequest(&skaldv1.DeleteRequest{Name: nstoken.AdminNamespace}))
		wantField(t, "delete default", err, "name")
		_, err = admin.namespaces.Get(ctxT(t), connect.NewRequest(&skaldv1.GetRequest{Name: "missing"}))
		wantCode(t, "get missing", err, connect.CodeNotFound)
		_, err = admin.namespaces.Delete(ctxT(t), connect.NewRequest(&skaldv1.DeleteRequest{Name: "missing"}))
		wantCode(t, "delete missing", err, connect.CodeNotFound)
		st, err := admin.cluster.Status(ctxT(t), connect.NewRequest(&skaldv1.StatusRequest{}))
		if err != nil || st.Msg.LeaderId == "" || st.Msg.NodeId != s.n.ID() || len(st.Msg.Servers) == 0 {
			t.Fatalf("cluster status: %v %v", st, err)
		}
		list, err := admin.namespaces.List(ctxT(t), connect.NewRequest(&skaldv1.ListRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, n := range list.Msg.Namespaces {
			names[n.Name] = true
		}
		if !names[nstoken.AdminNamespace] || !names[ns] {
			t.Fatalf("namespace list %v", names)
		}
		// Namespaces are isolated: the admin's default namespace has none of ns's streams.
		v, err := admin.events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "account-1"}))
		if err != nil || v.Msg.Version != -1 {
			t.Fatalf("default namespace sees another namespace's stream: %v %v", v, err)
		}
		// A deleted namespace's token stops working.
		tmp, err := admin.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: ns + "-tmp"}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.namespaces.Delete(ctxT(t), connect.NewRequest(&skaldv1.DeleteRequest{Name: ns + "-tmp"})); err != nil {
			t.Fatal(err)
		}
		_, err = newClients(s, p, tmp.Msg.Token).events.StreamVersion(ctxT(t), connect.NewRequest(&skaldv1.StreamVersionRequest{Stream: "s"}))
		wantCode(t, "deleted namespace's token", err, connect.CodeUnauthenticated)
	})

	t.Run("subscribe", func(t *testing.T) { subscribeSuite(t, c) })
}

// subscribeSuite: catch-up then live with concurrent writers, no gap and
// no duplicate; resume from a position.
func subscribeSuite(t *testing.T, c clients) {
	const before, writers, each = 5, 3, 20
	for i := 0; i < before; i++ {
		if _, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("sub-%d", i%2), Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}})); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	st, err := c.events.Subscribe(ctx, connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Category{Category: "sub"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var gps []int64
	caughtUp := -1
	var wg sync.WaitGroup
	for len(gps) < before+writers*each {
		if !st.Receive() {
			t.Fatalf("stream ended after %d messages: %v", len(gps), st.Err())
		}
		switch ev := st.Msg().Event.(type) {
		case *skaldv1.SubscribeResponse_Message:
			gps = append(gps, ev.Message.GlobalPosition)
		case *skaldv1.SubscribeResponse_CaughtUp:
			if caughtUp >= 0 {
				t.Fatal("caught_up sent twice")
			}
			caughtUp = len(gps)
			for w := 0; w < writers; w++ { // live writers start now
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < each; i++ {
						c.events.Append(context.Background(), connect.NewRequest(&skaldv1.AppendRequest{Stream: fmt.Sprintf("sub-%d", w), Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}}}))
					}
				}(w)
			}
		}
	}
	wg.Wait()
	if caughtUp != before {
		t.Fatalf("caught_up after %d messages, want %d", caughtUp, before)
	}
	for i := 1; i < len(gps); i++ {
		if gps[i] <= gps[i-1] {
			t.Fatalf("global positions not increasing: %v", gps)
		}
	}
	// The category's messages are exactly what was delivered.
	rc, err := c.events.ReadCategory(ctxT(t), connect.NewRequest(&skaldv1.ReadCategoryRequest{Category: "sub", Limit: -1}))
	if err != nil || len(rc.Msg.Messages) != len(gps) {
		t.Fatalf("category holds %d messages, delivered %d (%v)", len(rc.Msg.Messages), len(gps), err)
	}
	for i, m := range rc.Msg.Messages {
		if m.GlobalPosition != gps[i] {
			t.Fatalf("delivered %v, stored %d at %d", gps, m.GlobalPosition, i)
		}
	}
	// Resume a stream subscription from a position.
	rst, err := c.events.Subscribe(ctx, connect.NewRequest(&skaldv1.SubscribeRequest{Target: &skaldv1.SubscribeRequest_Stream{Stream: "sub-1"}, Position: 3}))
	if err != nil {
		t.Fatal(err)
	}
	defer rst.Close()
	want := int64(3)
	for rst.Receive() {
		if m := rst.Msg().GetMessage(); m != nil {
			if m.Position != want || m.Stream != "sub-1" {
				t.Fatalf("resumed subscription got position %d of %s, want %d", m.Position, m.Stream, want)
			}
			want++
			continue
		}
		if rst.Msg().GetCaughtUp() != nil {
			break
		}
	}
	if want <= 3 {
		t.Fatalf("resumed subscription delivered nothing: %v", rst.Err())
	}
	_, err = c.events.Subscribe(ctx, connect.NewRequest(&skaldv1.SubscribeRequest{}))
	if err == nil {
		bad, _ := c.events.Subscribe(ctx, connect.NewRequest(&skaldv1.SubscribeRequest{}))
		bad.Receive()
		err = bad.Err()
	}
	wantField(t, "subscribe without a target", err, "target")
}
