package fsm

import (
	"bytes"
	"reflect"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// decodeMessage must read exactly what proto.Unmarshal reads, but for data
// and metadata that are not UTF-8 (legacy entries): those read with
// U+FFFD in place of each invalid sequence.
func TestDecodeMessageMatchesProto(t *testing.T) {
	t.Parallel()
	full := &fsmv1.StoredMessage{Id: "0192f0c4-0000-7000-8000-000000000001", Stream: "account-1", Type: "Deposited",
		Position: 41, Data: []byte(`{"n":1}`), Metadata: []byte(`{"correlationStreamName":"x-1"}`), TimeUnixNano: 1_700_000_000_123_456_789,
		Tags: []string{"course:c1", "student:s7"}}
	enc := func(m *fsmv1.StoredMessage) []byte { b, _ := proto.Marshal(m); return b }
	withUnknown := protowire.AppendTag(enc(full), 99, protowire.BytesType)
	withUnknown = protowire.AppendBytes(withUnknown, []byte("from a newer version"))
	withUnknown = protowire.AppendTag(withUnknown, 98, protowire.VarintType)
	withUnknown = protowire.AppendVarint(withUnknown, 7)
	repeated := append(enc(full), enc(&fsmv1.StoredMessage{Type: "Withdrawn", Position: 42, Tags: []string{"more"}})...)
	wrongWire := protowire.AppendTag(enc(full), smPosition, protowire.BytesType) // skipped as unknown
	wrongWire = protowire.AppendBytes(wrongWire, []byte("x"))
	cases := []struct {
		name string
		val  []byte
	}{
		{"every field", enc(full)},
		{"no metadata", enc(&fsmv1.StoredMessage{Id: "i", Stream: "s-1", Type: "T", Data: []byte(`{}`)})},
		{"zero values", enc(&fsmv1.StoredMessage{})},
		{"negative position", enc(&fsmv1.StoredMessage{Position: -1})},
		{"unknown fields", withUnknown},
		{"last value wins", repeated},
		{"wrong wire type", wrongWire},
		{"data and metadata not UTF-8", enc(&fsmv1.StoredMessage{Type: "T", Data: []byte("{\"k\":\"a\xff\xfeb\"}"), Metadata: []byte("{\"m\":\"\xe2\x82\"}")})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sm fsmv1.StoredMessage
			if err := proto.Unmarshal(tc.val, &sm); err != nil {
				t.Fatal(err)
			}
			want := Message{ID: sm.Id, Stream: sm.Stream, Type: sm.Type, Position: sm.Position, GlobalPosition: 9,
				Data: sm.Data, Metadata: sm.Metadata, Time: sm.TimeUnixNano, Tags: sm.Tags}
			if !utf8.Valid(sm.Data) || !utf8.Valid(sm.Metadata) {
				want.Data, want.Metadata = bytes.ToValidUTF8(sm.Data, []byte("\uFFFD")), bytes.ToValidUTF8(sm.Metadata, []byte("\uFFFD"))
			}
			got, err := decodeMessage(9, tc.val)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decodeMessage = %+v\nproto        = %+v", got, want)
			}
			stream, typ, ok := peekStreamType(tc.val)
			if !ok || string(stream) != sm.Stream || string(typ) != sm.Type {
				t.Fatalf("peekStreamType = %q, %q, %v; proto: %q, %q", stream, typ, ok, sm.Stream, sm.Type)
			}
		})
	}
	for _, bad := range [][]byte{{0x0a, 0x05, 'a'}, {0x20}, {0xff}, {0x12, 0x05, 'a'}} {
		if _, err := decodeMessage(9, bad); err == nil {
			t.Fatalf("decodeMessage(%x) accepted a truncated value", bad)
		}
		if _, _, ok := peekStreamType(bad); ok {
			t.Fatalf("peekStreamType(%x) accepted a truncated value", bad)
		}
	}
}
