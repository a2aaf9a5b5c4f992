package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Tags, Query and conditional appends (DCB) through the API, on a single
// node and on a follower (forwarded writes, linearizable follower reads).
func TestDCB(t *testing.T) {
	t.Parallel()
	for _, target := range []struct {
		name  string
		start func(testing.TB) *server
	}{{"single", single}, {"follower", followerOfThree}} {
		t.Run(target.name, func(t *testing.T) { dcbSuite(t, target.start(t)) })
	}
}

func tagsQuery(items ...*skaldv1.QueryItem) *skaldv1.Query { return &skaldv1.Query{Items: items} }

func dcbSuite(t *testing.T, s *server) {
	admin := newClients(s, protocols[1], adminToken)
	created, err := admin.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: "dcb"}))
	if err != nil {
		t.Fatal(err)
	}
	token := created.Msg.Token
	c := newClients(s, protocols[1], token)
	msg := func(typ string, tags ...string) *skaldv1.NewMessage {
		return &skaldv1.NewMessage{Type: typ, Data: []byte(`{}`), Tags: tags}
	}
	appendTo := func(stream string, cond *skaldv1.AppendCondition, msgs ...*skaldv1.NewMessage) (*skaldv1.AppendResponse, error) {
		r, err := c.events.Append(ctxT(t), connect.NewRequest(&skaldv1.AppendRequest{Stream: stream, Messages: msgs, Condition: cond}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	}
	query := func(q *skaldv1.Query, after int64) ([]int64, error) {
		r, err := c.events.Query(ctxT(t), connect.NewRequest(&skaldv1.QueryRequest{Query: q, After: after}))
		if err != nil {
			return nil, err
		}
		gps := []int64{}
		for _, m := range r.Msg.Messages {
			gps = append(gps, m.GlobalPosition)
		}
		return gps, nil
	}
	total := func() int {
		r, err := c.events.ReadAll(ctxT(t), connect.NewRequest(&skaldv1.ReadAllRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Msg.Messages)
	}
	if _, err := appendTo("course-c1", nil, msg("Defined", "course:c1")); err != nil { // 1
		t.Fatal(err)
	}
	if _, err := appendTo("student-s1", nil, msg("Registered", "student:s1")); err != nil { // 2
		t.Fatal(err)
	}

	t.Run("every protocol returns tags", func(t *testing.T) {
		for _, p := range protocols {
			pc := newClients(s, p, token)
			r, err := pc.events.ReadStream(ctxT(t), connect.NewRequest(&skaldv1.ReadStreamRequest{Stream: "course-c1"}))
			if err != nil || len(r.Msg.Messages) != 1 || !reflect.DeepEqual(r.Msg.Messages[0].Tags, []string{"course:c1"}) {
				t.Fatalf("%s: ReadStream = %v, %v", p.name, r, err)
			}
			q, err := pc.events.Query(ctxT(t), connect.NewRequest(&skaldv1.QueryRequest{Query: tagsQuery(&skaldv1.QueryItem{Tags: []string{"student:s1"}})}))
			if err != nil || len(q.Msg.Messages) != 1 || q.Msg.Messages[0].GlobalPosition != 2 || q.Msg.Messages[0].Tags[0] != "student:s1" || q.Msg.AppliedIndex == 0 {
				t.Fatalf("%s: Query = %v, %v", p.name, q, err)
			}
		}
	})

	// The decision "subscribe s1 to c1" reads both tags, then appends on
	// condition that nothing it read changed.
	decision := tagsQuery(&skaldv1.QueryItem{Tags: []string{"course:c1"}}, &skaldv1.QueryItem{Tags: []string{"student:s1"}})
	t.Run("condition", func(t *testing.T) {
		gps, err := query(decision, 0)
		if err != nil || !reflect.DeepEqual(gps, []int64{1, 2}) {
			t.Fatalf("decision query = %v, %v", gps, err)
		}
		r, err := appendTo("course-c1", &skaldv1.AppendCondition{FailIfEventsMatch: decision, After: 2}, msg("Subscribed", "course:c1", "student:s1"))
		if err != nil || r.FirstGlobalPosition != 3 {
			t.Fatalf("first decider: %v, %v", r, err)
		}
		// A second decider that read the same state loses.
		_, err = appendTo("course-c1", &skaldv1.AppendCondition{FailIfEventsMatch: decision, After: 2}, msg("Subscribed", "course:c1", "student:s1"))
		ce := wantCode(t, "second decider", err, connect.CodeFailedPrecondition)
		if want := "append condition failed: message at global position 3 matches the query and is after 2"; ce.Message() != want {
			t.Fatalf("message %q, want %q", ce.Message(), want)
		}
		var d *skaldv1.ConditionFailed
		for _, dd := range ce.Details() {
			if v, derr := dd.Value(); derr == nil {
				d, _ = v.(*skaldv1.ConditionFailed)
			}
		}
		if !proto.Equal(d, &skaldv1.ConditionFailed{GlobalPosition: 3, After: 2}) {
			t.Fatalf("detail %v", d)
		}
		// AppendMulti takes the same condition.
		_, err = c.events.AppendMulti(ctxT(t), connect.NewRequest(&skaldv1.AppendMultiRequest{
			Streams:   []*skaldv1.StreamAppend{{Stream: "course-c1", Messages: []*skaldv1.NewMessage{msg("Subscribed", "course:c1")}}},
			Condition: &skaldv1.AppendCondition{FailIfEventsMatch: decision, After: 1}}))
		wantCode(t, "append-multi", err, connect.CodeFailedPrecondition)
		m, err := c.events.AppendMulti(ctxT(t), connect.NewRequest(&skaldv1.AppendMultiRequest{
			Streams:   []*skaldv1.StreamAppend{{Stream: "course-c1", Messages: []*skaldv1.NewMessage{msg("Subscribed", "course:c1")}}},
			Condition: &skaldv1.AppendCondition{FailIfEventsMatch: decision, After: 3}}))
		if err != nil || m.Msg.FirstGlobalPosition != 4 {
			t.Fatalf("append-multi after 3: %v, %v", m, err)
		}
	})

	before := total()
	tooMany := make([]string, 33)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("t%d", i)
	}
	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			req   *skaldv1.AppendRequest
			field string
			desc  string
		}{
			{"too many tags", &skaldv1.AppendRequest{Stream: "a-1", Messages: []*skaldv1.NewMessage{msg("T", tooMany...)}},
				"messages[0].tags", "must hold at most 32 tags, got 33"},
			{"repeated tag", &skaldv1.AppendRequest{Stream: "a-1", Messages: []*skaldv1.NewMessage{msg("T", "a", "a")}},
				"messages[0].tags[1]", `repeats messages[0].tags[0] "a"`},
			{"no query", &skaldv1.AppendRequest{Stream: "a-1", Messages: []*skaldv1.NewMessage{msg("T")}, Condition: &skaldv1.AppendCondition{}},
				"condition.fail_if_events_match", "must be set"},
			{"empty query", &skaldv1.AppendRequest{Stream: "a-1", Messages: []*skaldv1.NewMessage{msg("T")}, Condition: &skaldv1.AppendCondition{FailIfEventsMatch: &skaldv1.Query{}}},
				"condition.fail_if_events_match.items", "must hold 1..16 items, got 0"},
			{"empty item", &skaldv1.AppendRequest{Stream: "a-1", Messages: []*skaldv1.NewMessage{msg("T")}, Condition: &skaldv1.AppendCondition{FailIfEventsMatch: tagsQuery(&skaldv1.QueryItem{})}},
				"condition.fail_if_events_match.items[0]", "must name at least one type or tag"},
			{"too many tags in the query", &skaldv1.AppendRequest{Stream: "a-1", Messages: []*skaldv1.NewMessage{msg("T")}, Condition: &skaldv1.AppendCondition{FailIfEventsMatch: tagsQuery(&skaldv1.QueryItem{Tags: tooMany})}},
				"condition.fail_if_events_match.items[0].tags", "must hold at most 32 tags (a message carries no more), got 33"},
			{"negative after", &skaldv1.AppendRequest{Stream: "a-1", Messages: []*skaldv1.NewMessage{msg("T")}, Condition: &skaldv1.AppendCondition{FailIfEventsMatch: decision, After: -1}},
				"condition.after", "must not be negative, got -1"},
			{"future after", &skaldv1.AppendRequest{Stream: "a-1", Messages: []*skaldv1.NewMessage{msg("T")}, Condition: &skaldv1.AppendCondition{FailIfEventsMatch: decision, After: 99}},
				"condition.after", "is past the namespace's last global position 4, got 99"},
		} {
			_, err := c.events.Append(ctxT(t), connect.NewRequest(tc.req))
			wantViolation(t, tc.name, err, tc.field, tc.desc)
		}
		for _, tc := range []struct {
			name  string
			req   *skaldv1.QueryRequest
			field string
		}{
			{"query: none", &skaldv1.QueryRequest{}, "query"},
			{"query: no items", &skaldv1.QueryRequest{Query: &skaldv1.Query{}}, "query.items"},
			{"query: empty type", &skaldv1.QueryRequest{Query: tagsQuery(&skaldv1.QueryItem{Types: []string{""}})}, "query.items[0].types[0]"},
			{"query: negative after", &skaldv1.QueryRequest{Query: decision, After: -1}, "after"},
			{"query: limit", &skaldv1.QueryRequest{Query: decision, Limit: 10001}, "limit"},
		} {
			_, err := c.events.Query(ctxT(t), connect.NewRequest(tc.req))
			wantField(t, tc.name, err, tc.field)
		}
	})

	t.Run("unknown fields", func(t *testing.T) {
		// Binary: a field number this server does not know, inside the
		// condition's query.
		cond := &skaldv1.AppendCondition{FailIfEventsMatch: tagsQuery(&skaldv1.QueryItem{Tags: []string{"course:c1"}}), After: 0}
		cond.FailIfEventsMatch.Items[0].ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1))
		_, err := appendTo("a-1", cond, msg("T"))
		wantViolation(t, "binary", err, "condition.fail_if_events_match.items[0]",
			"holds field number 9, which this server does not know: refused rather than ignored")
		// JSON: a misspelled condition.
		for _, body := range []string{
			`{"stream":"a-1","messages":[{"type":"T","data":"e30="}],"conditon":{"failIfEventsMatch":{"items":[{"tags":["course:c1"]}]}}}`,
			`{"stream":"a-1","messages":[{"type":"T","data":"e30="}],"condition":{"failIfEventsMatch":{"items":[{"tag":["course:c1"]}]}}}`,
		} {
			req, _ := http.NewRequest(http.MethodPost, "http://"+s.addr+"/skald.v1.EventStore/Append", bytes.NewBufferString(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct{ Code, Message string }
			if err := json.Unmarshal(raw, &e); err != nil || resp.StatusCode != http.StatusBadRequest || e.Code != "invalid_argument" || !bytes.Contains(raw, []byte("unknown field")) {
				t.Fatalf("JSON with an unknown field: %d %s", resp.StatusCode, raw)
			}
		}
	})
	if n := total(); n != before {
		t.Fatalf("refused calls wrote: %d messages, was %d", n, before)
	}
}

// wantViolation is wantField that also pins the description.
func wantViolation(t *testing.T, what string, err error, field, desc string) {
	t.Helper()
	wantField(t, what, err, field)
	if ce := err.(*connect.Error); ce.Message() != field+": "+desc {
		t.Fatalf("%s: message %q, want %q", what, ce.Message(), field+": "+desc)
	}
}
