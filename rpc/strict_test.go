package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Strict input (issue 28, findings 6, 7 and 9): every refusal names the
// place, and changes nothing.

// importLine is one /import record with the given fields replaced (raw
// JSON values).
func importLine(over map[string]string) string {
	f := map[string]string{"id": `"i-1"`, "stream": `"bad-1"`, "type": `"T"`, "pos": `0`, "gpos": `500`,
		"data": `{"k":"v"}`, "meta": `null`, "time": `"2026-01-02T03:04:05Z"`}
	for k, v := range over {
		f[k] = v
	}
	var parts []string
	for _, k := range []string{"id", "stream", "type", "pos", "gpos", "data", "meta", "time", "tags"} {
		if v, ok := f[k]; ok {
			parts = append(parts, fmt.Sprintf("%q:%s", k, v))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestStrictImport(t *testing.T) {
	s := single(t)
	admin := evClient{t, s.addr, adminToken}
	var ns struct{ Token string }
	admin.ok(&ns, "ns.create", "strict-import")
	c := evClient{t, s.addr, ns.Token}
	cases := []struct {
		name  string
		over  map[string]string
		field string
		want  string // in the message
	}{
		{"pos 2^63-1", map[string]string{"pos": "9223372036854775807"}, "pos", "pos must be 0..4611686018427387903"},
		{"pos 2^62", map[string]string{"pos": "4611686018427387904"}, "pos", "got 4611686018427387904"},
		{"gpos 2^63-1", map[string]string{"gpos": "9223372036854775807"}, "gpos", "gpos must be 1..4611686018427387903"},
		{"gpos 0", map[string]string{"gpos": "0"}, "gpos", "got 0"},
		{"time 9999-12-31", map[string]string{"time": `"9999-12-31T00:00:00Z"`}, "time", "outside the times Skald stores"},
		{"time 0001-01-01", map[string]string{"time": `"0001-01-01T00:00:00Z"`}, "time", "1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z"},
		{"invalid UTF-8 in stream", map[string]string{"stream": "\"bad-\xff\""}, "stream", "stream is not UTF-8 text: byte 0xff is not UTF-8"},
		{"unpaired surrogate in type", map[string]string{"type": `"T\udc00"`}, "type", `\udc00 is an unpaired UTF-16 surrogate escape`},
		{"invalid UTF-8 in id", map[string]string{"id": "\"\xc3(\""}, "id", "byte 0xc3 is not UTF-8"},
		{"invalid UTF-8 in data", map[string]string{"data": "{\"a\":{\"note\":\"\xe2\x82\"}}"}, "data", "data is not UTF-8 text at a.note"},
		{"invalid UTF-8 in a data member name", map[string]string{"data": "{\"n\xff\":1}"}, "data", "in the member name"},
		{"invalid UTF-8 in meta", map[string]string{"meta": "{\"m\":[\"\xff\"]}"}, "meta", "meta is not UTF-8 text at m[0]"},
		{"tags not an array", map[string]string{"tags": `"course:c1"`}, "tags", "tags must be an array of strings or null"},
		{"a tag not a string", map[string]string{"tags": `["a",1]`}, "tags", "tags must be an array of strings or null"},
		{"an empty tag", map[string]string{"tags": `["a",""]`}, "tags", "tags[1] "},
		{"a repeated tag", map[string]string{"tags": `["a","b","a"]`}, "tags", `tags[2] repeats tags[0] "a"`},
	}
	good := importLine(map[string]string{"stream": `"good-1"`, "gpos": "400"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs := postImport(t, s.addr, ns.Token, []byte(good+"\n"+importLine(tc.over)+"\n"), false)
			last := evs[len(evs)-1]
			if last["error"] != "INVALID_RECORD" || last["line"] != float64(2) || last["field"] != tc.field || !strings.Contains(fmt.Sprint(last["message"]), tc.want) {
				t.Fatalf("events %v, want INVALID_RECORD at line 2, field %s, a message holding %q", evs, tc.field, tc.want)
			}
			// The chunk held both lines: neither was written.
			for _, stream := range []string{"good-1", "bad-1"} {
				if status, body := c.call("stream.version", stream); status != http.StatusOK || string(bytes.TrimSpace(body)) != "null" {
					t.Fatalf("stream %s after the refused import: %d %s", stream, status, body)
				}
			}
		})
	}

	// An import at the highest position allowed leaves room for writes:
	// before, one at 2^63-1 made the next write land at -2^63.
	top := importLine(map[string]string{"stream": `"top-1"`, "pos": "4611686018427387903", "gpos": "4611686018427387903"})
	if evs := postImport(t, s.addr, ns.Token, []byte(top+"\n"), false); evs[len(evs)-1]["done"] != true {
		t.Fatalf("import at 2^62-1: %v", evs)
	}
	for i := range int64(2) {
		var res struct{ Position, GlobalPosition int64 }
		c.ok(&res, "stream.write", "top-1", map[string]any{"type": "T", "data": map[string]any{}})
		if want := int64(1<<62) + i; res.Position != want || res.GlobalPosition != want {
			t.Fatalf("write %d after the import: %+v, want position and global position %d", i, res, want)
		}
	}
}

// rawRPC posts body to /rpc as it is.
func rawRPC(t *testing.T, c evClient, body string) (int, []byte) {
	t.Helper()
	return c.raw(http.MethodPost, "/rpc", []byte(body), "Bearer "+c.token)
}

func TestStrictEventoDBText(t *testing.T) {
	s := single(t)
	admin := evClient{t, s.addr, adminToken}
	var ns struct{ Token string }
	admin.ok(&ns, "ns.create", "strict-text")
	c := evClient{t, s.addr, ns.Token}
	cases := []struct {
		name, body string
		want       string // in the message
		stream     string // must hold nothing afterwards
	}{
		{"invalid UTF-8 in the stream name", "[\"stream.write\",\"acct-\xff\",{\"type\":\"T\",\"data\":{}}]",
			"argument 1 is not UTF-8 text: byte 0xff is not UTF-8 (byte 22 of the body)", "acct-\uFFFD"},
		{"unpaired surrogate in the stream name", `["stream.write","acct-\ud800",{"type":"T","data":{}}]`,
			`argument 1 is not UTF-8 text: \ud800 is an unpaired UTF-16 surrogate escape`, "acct-\uFFFD"},
		{"invalid UTF-8 in the type", "[\"stream.write\",\"acct-1\",{\"type\":\"T\xc0\",\"data\":{}}]",
			"argument 2 is not UTF-8 text at type: byte 0xc0", "acct-1"},
		{"invalid UTF-8 in data", "[\"stream.write\",\"acct-1\",{\"type\":\"T\",\"data\":{\"k\":\"\xff\"}}]",
			"argument 2 is not UTF-8 text at data.k: byte 0xff", "acct-1"},
		{"surrogates in the wrong order in data", `["stream.write","acct-1",{"type":"T","data":{"k":"\udc00\ud800"}}]`,
			`argument 2 is not UTF-8 text at data.k: \udc00 is an unpaired`, "acct-1"},
		{"invalid UTF-8 in a data member name", "[\"stream.write\",\"acct-1\",{\"type\":\"T\",\"data\":{\"\xff\":1}}]",
			"argument 2 is not UTF-8 text in the member name data[", "acct-1"},
		{"invalid UTF-8 in metadata", "[\"stream.write\",\"acct-1\",{\"type\":\"T\",\"data\":{},\"metadata\":{\"x\":\"\xed\xa0\x80\"}}]",
			"argument 2 is not UTF-8 text at metadata.x: byte 0xed", "acct-1"},
		{"invalid UTF-8 in an option", "[\"stream.write\",\"acct-1\",{\"type\":\"T\",\"data\":{}},{\"id\":\"\xff\"}]",
			"argument 3 is not UTF-8 text at id", "acct-1"},
		{"invalid UTF-8 in the method name", "[\"stream.write\xff\",\"acct-1\",{\"type\":\"T\",\"data\":{}}]",
			"the method name is not UTF-8 text", "acct-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rawRPC(t, c, tc.body)
			checkEvError(t, tc.name, status, body, http.StatusBadRequest, "INVALID_REQUEST")
			var e struct{ Error struct{ Message string } }
			if json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error.Message, tc.want) {
				t.Fatalf("%s: %s, want a message holding %q", tc.name, body, tc.want)
			}
			if !utf8.Valid(body) {
				t.Fatalf("%s: the error reply is not UTF-8: %q", tc.name, body)
			}
			if status, body := c.call("stream.version", tc.stream); status != http.StatusOK || string(bytes.TrimSpace(body)) != "null" {
				t.Fatalf("%s: stream %q after the refusal: %d %s", tc.name, tc.stream, status, body)
			}
		})
	}

	// Text that is UTF-8, escapes included, is stored and read back as sent.
	write := `["stream.write","café-1",{"type":"Überweisung","data":{"note":"東京 \ud83d\ude00 \u00e9 é","n":1},"metadata":{"m":"ß"}}]`
	if status, body := rawRPC(t, c, write); status != http.StatusOK {
		t.Fatalf("UTF-8 write: %d %s", status, body)
	}
	var msgs [][]json.RawMessage
	c.ok(&msgs, "stream.get", "café-1")
	if len(msgs) != 1 || string(msgs[0][1]) != `"Überweisung"` || string(msgs[0][4]) != `{"note":"東京 \ud83d\ude00 \u00e9 é","n":1}` || string(msgs[0][5]) != `{"m":"ß"}` {
		t.Fatalf("read back %s", msgs)
	}
}

// TestStrictNamespaceNames: reserved and path-like names are refused on
// both APIs; ordinary ones still work.
func TestStrictNamespaceNames(t *testing.T) {
	s := single(t)
	admin := evClient{t, s.addr, adminToken}
	cc := newClients(s, protocols[0], adminToken)
	for name, want := range map[string]string{
		"CON": "Windows device name", "nul.txt": "Windows device name", "com1": "Windows device name",
		".": "must start with a letter or a digit", "..": "must start with a letter or a digit", "_metadata": "must start with a letter or a digit",
		".hidden": "must start with a letter or a digit", "orders.": "must not end with '.'",
	} {
		status, body := admin.call("ns.create", name)
		checkEvError(t, "ns.create "+name, status, body, http.StatusBadRequest, "INVALID_REQUEST")
		if !bytes.Contains(body, []byte(want)) {
			t.Fatalf("ns.create %q: %s, want %q", name, body, want)
		}
		_, err := cc.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: name}))
		wantField(t, "Create "+name, err, "name")
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Create %q: %v, want %q", name, err, want)
		}
	}
	admin.fails(http.StatusNotFound, "NAMESPACE_NOT_FOUND", "ns.info", "CON")
	for _, name := range []string{"orders.v2", "Console", "x_metadata", "com10"} {
		admin.ok(nil, "ns.create", name)
	}
}

// TestStrictConnectText: data and metadata are bytes in the Connect API,
// so fsm.ValidateAppend holds them to UTF-8 text; strings (stream, type)
// are refused by protobuf itself in both encodings, never repaired.
func TestStrictConnectText(t *testing.T) {
	s := single(t)
	admin := newClients(s, protocols[0], adminToken)
	created, err := admin.namespaces.Create(ctxT(t), connect.NewRequest(&skaldv1.CreateRequest{Name: "strict-connect"}))
	if err != nil {
		t.Fatal(err)
	}
	token := created.Msg.Token
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := newClients(s, p, token)
			for _, tc := range []struct {
				name  string
				req   *skaldv1.AppendRequest
				field string
				want  string
			}{
				{"data", &skaldv1.AppendRequest{Stream: "c-1", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte("{\"k\":\"\xff\"}")}}},
					"messages[0].data", "must be UTF-8 text: byte 0xff is not UTF-8 in a string at k (byte 6)"},
				{"surrogate in data", &skaldv1.AppendRequest{Stream: "c-1", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`)}, {Type: "T", Data: []byte(`{"a":["\ud800"]}`)}}},
					"messages[1].data", `\ud800 is an unpaired UTF-16 surrogate escape in a string at a[0]`},
				{"metadata", &skaldv1.AppendRequest{Stream: "c-1", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte(`{}`), Metadata: []byte("{\"\xe2\":1}")}}},
					"messages[0].metadata", "in a member name"},
			} {
				_, err := c.events.Append(ctxT(t), connect.NewRequest(tc.req))
				wantField(t, tc.name, err, tc.field)
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: %v, want %q", tc.name, err, tc.want)
				}
			}
			_, err := c.events.AppendMulti(ctxT(t), connect.NewRequest(&skaldv1.AppendMultiRequest{Streams: []*skaldv1.StreamAppend{
				{Stream: "c-2", Messages: []*skaldv1.NewMessage{{Type: "T", Data: []byte("{\"k\":\"\xff\"}")}}}}}))
			wantField(t, "AppendMulti", err, "streams[0].messages[0].data")
		})
	}

	// Strings: a hand-encoded binary request and a JSON one, each with
	// invalid UTF-8 in the type.
	var msg []byte
	msg = protowire.AppendTag(msg, 2, protowire.BytesType)
	msg = protowire.AppendString(msg, "T\xff")
	msg = protowire.AppendTag(msg, 3, protowire.BytesType)
	msg = protowire.AppendBytes(msg, []byte(`{}`))
	var bin []byte
	bin = protowire.AppendTag(bin, 1, protowire.BytesType)
	bin = protowire.AppendString(bin, "c-3")
	bin = protowire.AppendTag(bin, 2, protowire.BytesType)
	bin = protowire.AppendBytes(bin, msg)
	for _, tc := range []struct {
		contentType string
		body        []byte
		want        string
	}{
		{"application/proto", bin, "messages[0].type: string is not valid UTF-8"}, // protoCodec names the field
		{"application/json", []byte("{\"stream\":\"c-3\",\"messages\":[{\"type\":\"T\xff\",\"data\":\"e30=\"}]}"), "(line 1:37): invalid UTF-8 in string"},
	} {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+s.addr+"/skald.v1.EventStore/Append", bytes.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.contentType)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Code, Message string }
		if err := json.Unmarshal(raw, &e); err != nil || resp.StatusCode != http.StatusBadRequest || e.Code != "invalid_argument" || !strings.Contains(e.Message, tc.want) {
			t.Fatalf("%s with invalid UTF-8 in the type: %d %s", tc.contentType, resp.StatusCode, raw)
		}
	}
	read, err := newClients(s, protocols[1], token).events.ReadAll(ctxT(t), connect.NewRequest(&skaldv1.ReadAllRequest{}))
	if err != nil || len(read.Msg.Messages) != 0 {
		t.Fatalf("after the refusals: %v, %v", read, err)
	}
}

// TestBadUTF8Field: protoCodec's path of the first string that is not
// UTF-8, at any depth.
func TestBadUTF8Field(t *testing.T) {
	const mark = "MARK" // replaced by 4 bytes that are not UTF-8 after marshaling
	m := func(typ string, tags ...string) *skaldv1.NewMessage {
		return &skaldv1.NewMessage{Type: typ, Data: []byte(`{"MARK":1}`), Tags: tags}
	}
	cases := []struct {
		name string
		msg  proto.Message
		want string // "" when none is found
	}{
		{"stream", &skaldv1.AppendRequest{Stream: mark, Messages: []*skaldv1.NewMessage{m("T")}}, "stream"},
		{"second message's type", &skaldv1.AppendRequest{Stream: "s-1", Messages: []*skaldv1.NewMessage{m("T"), m(mark)}}, "messages[1].type"},
		{"a tag", &skaldv1.AppendRequest{Stream: "s-1", Messages: []*skaldv1.NewMessage{m("T", "a", mark)}}, "messages[0].tags[1]"},
		{"multi", &skaldv1.AppendMultiRequest{Streams: []*skaldv1.StreamAppend{{Stream: "a-1", Messages: []*skaldv1.NewMessage{m("T")}},
			{Stream: "b-1", Messages: []*skaldv1.NewMessage{m("T"), m("T"), m(mark)}}}}, "streams[1].messages[2].type"},
		{"condition", &skaldv1.AppendRequest{Stream: "s-1", Messages: []*skaldv1.NewMessage{m("T")},
			Condition: &skaldv1.AppendCondition{FailIfEventsMatch: &skaldv1.Query{Items: []*skaldv1.QueryItem{{Types: []string{"x", mark}}}}}},
			"condition.fail_if_events_match.items[0].types[1]"},
		{"only in bytes: not a string", &skaldv1.AppendRequest{Stream: "s-1", Messages: []*skaldv1.NewMessage{m("T")}}, ""},
	}
	for _, tc := range cases {
		b, err := proto.Marshal(tc.msg)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte(mark), []byte("\xff\xfe\xc0\xc1"))
		got, ok := badUTF8Field(tc.msg.ProtoReflect().Descriptor(), b, "")
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: badUTF8Field = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}
