package command

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/client"
)

// TestWriteJSONAsTheAPI: a client value prints as the API message with the
// same facts prints (PrintJSON, protojson with numbers), byte for byte, so
// -o json kept its form when it stopped converting client types back.
func TestWriteJSONAsTheAPI(t *testing.T) {
	created := time.Date(2026, 11, 26, 4, 30, 0, 120_000_000, time.UTC)
	for _, tc := range []struct {
		name   string
		client any
		api    *skaldv1.NamespaceInfo
	}{
		{"every field", client.Namespace{Name: "shop", Description: "the \"shop\" <&>", CreatedAt: created, MessageCount: 3, StreamCount: 2,
			LastActivity: created.Add(time.Nanosecond), DedupeWindow: 2 * time.Minute},
			&skaldv1.NamespaceInfo{Name: "shop", Description: "the \"shop\" <&>", CreatedAt: TimestampOf(created), MessageCount: 3, StreamCount: 2,
				LastActivity: TimestampOf(created.Add(time.Nanosecond)), DedupeWindow: durationpb.New(2 * time.Minute)}},
		{"empty: zero times are null", client.Namespace{Name: "x", DedupeForever: true, DedupeWindow: 1500 * time.Microsecond},
			&skaldv1.NamespaceInfo{Name: "x", DedupeForever: true, DedupeWindow: durationpb.New(1500 * time.Microsecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got, want bytes.Buffer
			if err := WriteJSON(&got, tc.client); err != nil {
				t.Fatal(err)
			}
			if err := PrintJSON(&want, tc.api); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Fatalf("WriteJSON:\n%s\nthe API's JSON:\n%s", got.String(), want.String())
			}
		})
	}
}

func TestWriteJSONValues(t *testing.T) {
	type inner struct{ ID string }
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"names", struct {
			NodeID, APIAddress, IDs, ID, RaftAddress string
		}{}, `{"nodeId":"","apiAddress":"","ids":"","id":"","raftAddress":""}`},
		{"tags", struct {
			A string `json:"alpha"`
			B string `json:"-"`
		}{"a", "b"}, `{"alpha":"a"}`},
		{"embedded", struct {
			inner
			Attempt int32
		}{inner{"m1"}, 2}, `{"id":"m1","attempt":2}`},
		{"nil slice and pointer", struct {
			S []string
			P *int64
		}{}, `{"s":[],"p":null}`},
		{"raw JSON", struct{ Data, Metadata []byte }{[]byte("hi"), nil}, `{"data":"aGk=","metadata":""}`},
		{"durations", []time.Duration{0, time.Second, -1500 * time.Millisecond, time.Nanosecond}, `["0s","1s","-1.500s","0.000000001s"]`},
		{"a map, sorted", map[string]uint64{"b": 2, "a": 1 << 60}, `{"a":1152921504606846976,"b":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteJSON(&b, tc.v); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tc.want+"\n" {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}
