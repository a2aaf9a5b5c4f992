package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/rpc/evdb"
)

// noProposals is a backend that fails the test when an edge proposes:
// every command the edge tests send is one the edge must refuse.
type noProposals struct {
	Backend
	t *testing.T
}

func (b noProposals) Append(context.Context, *fsmv1.Append) (*fsmv1.Result, error) {
	b.t.Error("the edge proposed an append it should refuse")
	return nil, errors.New("proposed")
}

func (b noProposals) AppendMulti(context.Context, *fsmv1.AppendMulti) (*fsmv1.Result, error) {
	b.t.Error("the edge proposed an append it should refuse")
	return nil, errors.New("proposed")
}

// applyStore is an in-memory state machine holding namespace "ns", which
// applies commands as a leader would propose them: stamped, under
// fsm.InputRules.
type applyStore struct {
	t     *testing.T
	s     *fsm.Store
	index uint64
}

func newApplyStore(t *testing.T) *applyStore {
	t.Helper()
	s, err := fsm.Open(fsm.Options{Dir: "/fsm", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a := &applyStore{t: t, s: s}
	if _, ok := a.apply(&fsmv1.Command{Kind: &fsmv1.Command_CreateNamespace{
		CreateNamespace: &fsmv1.CreateNamespace{Name: "ns"}}}).(*fsmv1.Result); !ok {
		t.Fatal("creating the namespace failed")
	}
	return a
}

// apply stamps cmd as the leader does and applies it; it returns what
// apply answered.
func (a *applyStore) apply(cmd *fsmv1.Command) any {
	a.t.Helper()
	k, ok := fsm.KindOf(cmd)
	if !ok {
		a.t.Fatalf("%T has no kind", cmd.GetKind())
	}
	cmd.InputRules = fsm.InputRules
	n := 0
	if k.Stamp != nil {
		k.Stamp(cmd, 1_700_000_000_000_000_000, func() string {
			n++
			return fmt.Sprintf("0192f0c4-0000-7000-8000-%012d", n)
		})
	}
	data, err := fsm.EncodeCommand(cmd)
	if err != nil {
		a.t.Fatal(err)
	}
	a.index++
	return a.s.ApplyBatch([]fsm.Entry{{Index: a.index, Term: 1, Data: data}})[0]
}

// refusal is apply's answer as a field and a reason; the test fails when
// apply did not refuse with a ValidationError.
func refusal(t *testing.T, what string, r any) (field, reason string) {
	t.Helper()
	var ve *fsm.ValidationError
	if err, ok := r.(error); !ok || !errors.As(err, &ve) {
		t.Fatalf("%s: apply answered %v, want a validation error", what, r)
	}
	return ve.Field, ve.Reason
}

// violation is the Connect edge's refusal as a field and a reason.
func violation(t *testing.T, what string, err error) (field, reason string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		t.Fatalf("%s: the edge answered %v, want InvalidArgument", what, err)
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if br, ok := v.(*errdetails.BadRequest); derr == nil && ok && len(br.FieldViolations) == 1 {
			return br.FieldViolations[0].Field, br.FieldViolations[0].Description
		}
	}
	t.Fatalf("%s: no field violation in %v", what, ce)
	return "", ""
}

// TestEdgeAndApplyRefuseAlike: for each bad append, the Connect edge
// (Append, AppendMulti) refuses it before proposing, and apply refuses
// the same command, as the edge would have proposed it, with the same
// field and reason. An edge that restated a rule in its own words, or
// checked less than apply, fails here.
func TestEdgeAndApplyRefuseAlike(t *testing.T) {
	t.Parallel()
	a := newApplyStore(t)
	s := &eventStore{b: noProposals{t: t}}
	ctx := context.WithValue(context.Background(), callerKey{}, caller{namespace: "ns"})
	msg := func(typ, data string) *skaldv1.NewMessage {
		return &skaldv1.NewMessage{Type: typ, Data: []byte(data)}
	}
	ok := msg("T", `{}`)
	many := make([]*skaldv1.NewMessage, fsm.MaxAppendMessages+1)
	for i := range many {
		many[i] = ok
	}
	tags := func(m *skaldv1.NewMessage, tags ...string) *skaldv1.NewMessage {
		m = proto.Clone(m).(*skaldv1.NewMessage)
		m.Tags = tags
		return m
	}
	items := func(n int) *skaldv1.AppendCondition {
		q := &skaldv1.Query{}
		for range n {
			q.Items = append(q.Items, &skaldv1.QueryItem{Types: []string{"T"}})
		}
		return &skaldv1.AppendCondition{FailIfEventsMatch: q}
	}
	one := []*skaldv1.NewMessage{ok}
	withMeta := &skaldv1.NewMessage{Type: "T", Data: []byte(`{}`), Metadata: []byte(`5`)}
	query := items(1).FailIfEventsMatch
	appends := []struct {
		name   string
		stream string
		ev     *int64
		msgs   []*skaldv1.NewMessage
		cond   *skaldv1.AppendCondition
	}{
		{name: "empty stream", msgs: one},
		{name: "NUL in the stream", stream: "a\x00", msgs: one},
		{name: "expected version -2", stream: "s-1", ev: proto.Int64(-2), msgs: one},
		{name: "no messages", stream: "s-1"},
		{name: "too many messages", stream: "s-1", msgs: many},
		{name: "empty type", stream: "s-1", msgs: []*skaldv1.NewMessage{ok, msg("", `{}`)}},
		{name: "long type", stream: "s-1", msgs: []*skaldv1.NewMessage{msg(strings.Repeat("t", 257), `{}`)}},
		{name: "array data", stream: "s-1", msgs: []*skaldv1.NewMessage{msg("T", `[1]`)}},
		{name: "data not JSON", stream: "s-1", msgs: []*skaldv1.NewMessage{msg("T", `{"a":`)}},
		{name: "data not UTF-8", stream: "s-1", msgs: []*skaldv1.NewMessage{msg("T", "{\"k\":\"\xff\"}")}},
		{name: "number metadata", stream: "s-1", msgs: []*skaldv1.NewMessage{withMeta}},
		{name: "repeated tag", stream: "s-1", msgs: []*skaldv1.NewMessage{tags(ok, "a", "a")}},
		{name: "condition without a query", stream: "s-1", msgs: one, cond: &skaldv1.AppendCondition{}},
		{name: "condition with no items", stream: "s-1", msgs: one, cond: items(0)},
		{name: "condition after -1", stream: "s-1", msgs: one,
			cond: &skaldv1.AppendCondition{FailIfEventsMatch: query, After: -1}},
	}
	for _, tc := range appends {
		t.Run("append/"+tc.name, func(t *testing.T) {
			_, err := s.append(ctx, &skaldv1.AppendRequest{Stream: tc.stream, ExpectedVersion: tc.ev,
				Messages: tc.msgs, Condition: tc.cond})
			field, reason := violation(t, tc.name, err)
			cmd := &fsmv1.Append{Namespace: "ns", Stream: tc.stream, ExpectedVersion: tc.ev,
				Messages: newMessages(tc.msgs), Condition: conditionOf(tc.cond)}
			f, r := refusal(t, tc.name, a.apply(&fsmv1.Command{Kind: &fsmv1.Command_Append{Append: cmd}}))
			if field != f || reason != r {
				t.Errorf("%s: the edge refuses %s: %s; apply %s: %s", tc.name, field, reason, f, r)
			}
		})
	}

	part := func(stream string, ev *int64, msgs ...*skaldv1.NewMessage) *skaldv1.StreamAppend {
		return &skaldv1.StreamAppend{Stream: stream, ExpectedVersion: ev, Messages: msgs}
	}
	streams := make([]*skaldv1.StreamAppend, fsm.MaxMultiStreams+1)
	for i := range streams {
		streams[i] = part(fmt.Sprintf("s-%d", i), nil, ok)
	}
	big := msg("T", `{"k":"`+strings.Repeat("x", 900<<10)+`"}`)
	nine := make([]*skaldv1.StreamAppend, 10)
	for i := range nine {
		nine[i] = part(fmt.Sprintf("b-%d", i), nil, big)
	}
	parts := func(ps ...*skaldv1.StreamAppend) []*skaldv1.StreamAppend { return ps }
	multis := []struct {
		name  string
		parts []*skaldv1.StreamAppend
		cond  *skaldv1.AppendCondition
	}{
		{name: "no streams"},
		{name: "too many streams", parts: streams},
		{name: "a stream twice", parts: parts(part("a-1", nil, ok), part("a-1", nil, ok))},
		{name: "empty stream", parts: parts(part("", nil, ok))},
		{name: "a stream without messages", parts: parts(part("a-1", nil, ok), part("b-1", nil))},
		{name: "expected version -2", parts: parts(part("a-1", proto.Int64(-2), ok))},
		{name: "too many messages in all", parts: parts(part("a-1", nil, many[1:]...), part("b-1", nil, ok, ok))},
		{name: "too many messages in a stream", parts: parts(part("a-1", nil, many...))},
		{name: "too many bytes", parts: nine},
		{name: "bad data in the second stream", parts: parts(part("a-1", nil, ok), part("b-1", nil, ok, msg("T", `1`)))},
		{name: "repeated tag", parts: parts(part("a-1", nil, tags(ok, "x", "x")))},
		{name: "condition with no items", parts: parts(part("a-1", nil, ok)), cond: items(0)},
	}
	for _, tc := range multis {
		t.Run("multi/"+tc.name, func(t *testing.T) {
			_, err := s.AppendMulti(ctx, connect.NewRequest(&skaldv1.AppendMultiRequest{Streams: tc.parts, Condition: tc.cond}))
			field, reason := violation(t, tc.name, err)
			cmd := &fsmv1.AppendMulti{Namespace: "ns", Condition: conditionOf(tc.cond)}
			for _, p := range tc.parts {
				cmd.Streams = append(cmd.Streams, &fsmv1.StreamAppend{Stream: p.Stream, ExpectedVersion: p.ExpectedVersion,
					Messages: newMessages(p.Messages)})
			}
			f, r := refusal(t, tc.name, a.apply(&fsmv1.Command{Kind: &fsmv1.Command_AppendMulti{AppendMulti: cmd}}))
			if field != f || reason != r {
				t.Errorf("%s: the edge refuses %s: %s; apply %s: %s", tc.name, field, reason, f, r)
			}
		})
	}
}

// TestEvdbWriteRefusesAsApply: EventoDB's stream.write refuses a bad
// message before proposing, in apply's reason under the name of its
// argument (evWriteRefused of what apply answers).
func TestEvdbWriteRefusesAsApply(t *testing.T) {
	t.Parallel()
	a := newApplyStore(t)
	e := &eventodb{b: noProposals{t: t}}
	ctx := context.WithValue(context.Background(), callerKey{}, caller{namespace: "ns"})
	cases := []struct {
		name    string
		message string // argument 2
		opts    string // argument 3, "" for none
		want    string // the edge's message
	}{
		{"empty type", `{"type":"","data":{}}`, "", "message.type must not be empty"},
		{"long type", `{"type":"` + strings.Repeat("t", 257) + `","data":{}}`, "",
			"message.type must be at most 256 bytes, got 257"},
		{"no data", `{"type":"T"}`, "", "message.data must be a JSON object"},
		{"array data", `{"type":"T","data":[1]}`, "", "message.data must be a JSON object"},
		{"null data", `{"type":"T","data":null}`, "", "message.data must be a JSON object"},
		{"number metadata", `{"type":"T","data":{},"metadata":5}`, "",
			"message.metadata must be a JSON object or null"},
		{"expected version -2", `{"type":"T","data":{}}`, `{"expectedVersion":-2}`,
			"expectedVersion must be -1 (no stream) or more, got -2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := evdb.Args{json.RawMessage(`"s-1"`), json.RawMessage(tc.message)}
			if tc.opts != "" {
				args = append(args, json.RawMessage(tc.opts))
			}
			_, everr := e.streamWrite(ctx, args)
			if everr == nil || everr.Code != "INVALID_REQUEST" || everr.Message != tc.want {
				t.Fatalf("%s: the edge answered %v, want INVALID_REQUEST %q", tc.name, everr, tc.want)
			}
			var m struct {
				Type     string
				Data     json.RawMessage
				Metadata json.RawMessage
			}
			if err := json.Unmarshal([]byte(tc.message), &m); err != nil {
				t.Fatal(err)
			}
			var ev struct{ ExpectedVersion *int64 }
			if tc.opts != "" {
				if err := json.Unmarshal([]byte(tc.opts), &ev); err != nil {
					t.Fatal(err)
				}
			}
			cmd := &fsmv1.Append{Namespace: "ns", Stream: "s-1", ExpectedVersion: ev.ExpectedVersion,
				Messages: []*fsmv1.NewMessage{{Type: m.Type, Data: m.Data, Metadata: m.Metadata}}}
			r := a.apply(&fsmv1.Command{Kind: &fsmv1.Command_Append{Append: cmd}})
			refusal(t, tc.name, r)
			if got := evWriteRefused(r.(error)); tc.opts == "" && got.Message != everr.Message {
				t.Errorf("%s: the edge says %q, apply's refusal reads %q", tc.name, everr.Message, got.Message)
			}
		})
	}
}
