package kurrentdb

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
)

// The wire tests send what other KurrentDB clients send (the Node and
// Rust clients: ids as strings) and what no client should, with
// connect-go's gRPC client over h2c.

func h2cClient() *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{}}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// rawAppend sends msgs as one Append to m.
func rawAppend(t *testing.T, m *member, msgs ...*streams.AppendReq) (*streams.AppendResp, error) {
	t.Helper()
	cl := connect.NewClient[streams.AppendReq, streams.AppendResp](h2cClient(), "http://"+m.addr+appendProcedure,
		connect.WithGRPC())
	s := cl.CallClientStream(ctxT(t))
	for _, msg := range msgs {
		if err := s.Send(msg); err != nil {
			break // the answer says why
		}
	}
	resp, err := s.CloseAndReceive()
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func options(stream string) *streams.AppendReq {
	return &streams.AppendReq{Content: &streams.AppendReq_Options_{Options: &streams.AppendReq_Options{
		StreamIdentifier:       &shared.StreamIdentifier{StreamName: []byte(stream)},
		ExpectedStreamRevision: &streams.AppendReq_Options_Any{Any: &shared.Empty{}},
	}}}
}

func proposed(id *shared.UUID, typ, data string) *streams.AppendReq {
	p := &streams.AppendReq_ProposedMessage{
		Id: id, Metadata: map[string]string{keyType: typ, keyContentType: contentJSON}, Data: []byte(data),
	}
	return &streams.AppendReq{Content: &streams.AppendReq_ProposedMessage_{ProposedMessage: p}}
}

func stringID(u uuid.UUID) *shared.UUID {
	return &shared.UUID{Value: &shared.UUID_String_{String_: u.String()}}
}

// rawRead reads stream forwards from its start with ids in the string
// form (stringIDs) or the structured one.
func rawRead(t *testing.T, m *member, stream string, stringIDs bool) []*streams.ReadResp {
	t.Helper()
	cl := connect.NewClient[streams.ReadReq, streams.ReadResp](h2cClient(), "http://"+m.addr+readProcedure,
		connect.WithGRPC())
	opt := &streams.ReadReq_Options_UUIDOption{
		Content: &streams.ReadReq_Options_UUIDOption_Structured{Structured: &shared.Empty{}}}
	if stringIDs {
		opt.Content = &streams.ReadReq_Options_UUIDOption_String_{String_: &shared.Empty{}}
	}
	s, err := cl.CallServerStream(ctxT(t), connect.NewRequest(&streams.ReadReq{Options: &streams.ReadReq_Options{
		StreamOption: &streams.ReadReq_Options_Stream{Stream: &streams.ReadReq_Options_StreamOptions{
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(stream)},
			RevisionOption:   &streams.ReadReq_Options_StreamOptions_Start{Start: &shared.Empty{}},
		}},
		CountOption:  &streams.ReadReq_Options_Count{Count: 100},
		FilterOption: &streams.ReadReq_Options_NoFilter{NoFilter: &shared.Empty{}},
		UuidOption:   opt,
	}}))
	if err != nil {
		t.Fatal(err)
	}
	var out []*streams.ReadResp
	for s.Receive() {
		out = append(out, s.Msg())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStringIDs: ids sent as strings are stored as the same UUID and
// read back in the form each reader asks for.
func TestStringIDs(t *testing.T) {
	f := start(t, 1, insecureMode)
	id := uuid.New()
	resp, err := rawAppend(t, f.leader, options("node-1"), proposed(stringID(id), "Made", `{"by":"node"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetSuccess().GetCurrentRevision(); resp.GetSuccess() == nil || got != 0 {
		t.Fatalf("append answered %v, want success at revision 0", resp)
	}
	for _, stringIDs := range []bool{true, false} {
		msgs := rawRead(t, f.leader, "node-1", stringIDs)
		if len(msgs) != 1 || msgs[0].GetEvent() == nil {
			t.Fatalf("string ids %t: read %v, want one event message", stringIDs, msgs)
		}
		got, err := idOf(msgs[0].GetEvent().GetEvent().GetId())
		if err != nil || got != id.String() {
			t.Errorf("string ids %t: id %v (%v), want %s", stringIDs, msgs[0].GetEvent().GetEvent().GetId(), err, id)
		}
		_, isString := msgs[0].GetEvent().GetEvent().GetId().GetValue().(*shared.UUID_String_)
		if isString != stringIDs {
			t.Errorf("string ids %t: the id came as %T", stringIDs, msgs[0].GetEvent().GetEvent().GetId().GetValue())
		}
	}
}

// TestMalformedAppend: an Append out of KurrentDB's order, or with an id
// that is not a UUID, is refused saying so, and writes nothing.
func TestMalformedAppend(t *testing.T) {
	f := start(t, 1, insecureMode)
	ev := proposed(stringID(uuid.New()), "Made", `{}`)
	for _, c := range []struct {
		name string
		msgs []*streams.AppendReq
		says string
	}{
		{"events before options", []*streams.AppendReq{ev, options("bad-1")},
			"first message of an Append must be its options"},
		{"options twice", []*streams.AppendReq{options("bad-1"), ev, options("bad-1")}, "options may be sent only once"},
		{"id not a UUID", []*streams.AppendReq{options("bad-1"),
			proposed(&shared.UUID{Value: &shared.UUID_String_{String_: "nope"}}, "Made", `{}`)}, `id "nope" is not a UUID`},
		{"no options", nil, "the request ended before the options"},
		{"no expected revision", []*streams.AppendReq{{Content: &streams.AppendReq_Options_{
			Options: &streams.AppendReq_Options{StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte("bad-1")}}}}, ev},
			"must give an expected revision"},
	} {
		_, err := rawAppend(t, f.leader, c.msgs...)
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want InvalidArgument saying %q", c.name, err, c.says)
		}
	}
	msgs := rawRead(t, f.leader, "bad-1", false)
	if len(msgs) != 1 || msgs[0].GetStreamNotFound() == nil {
		t.Errorf("after the refused appends: %v, want stream_not_found (nothing written)", msgs)
	}
}
