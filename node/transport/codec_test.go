package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// appendEntriesCases are AppendEntries requests covering what the
// binary framing carries: heartbeats, every log type, nil, empty and
// large entries, extensions, and a full batch.
func appendEntriesCases() []struct {
	name string
	req  *raft.AppendEntriesRequest
} {
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("127.0.0.1:7001")}
	at := time.Date(2026, 11, 26, 4, 30, 0, 123456789, time.UTC)
	large := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	full := make([]*raft.Log, 64)
	for i := range full {
		full[i] = &raft.Log{
			Index:      uint64(1000 + i),
			Term:       7,
			Type:       raft.LogCommand,
			Data:       bytes.Repeat([]byte{byte(i)}, 300),
			AppendedAt: at,
		}
	}
	cases := []struct {
		name string
		req  *raft.AppendEntriesRequest
	}{
		{"empty request", &raft.AppendEntriesRequest{}},
		{"heartbeat", &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 3}},
		{
			"commit index only",
			&raft.AppendEntriesRequest{
				RPCHeader:         hdr,
				Term:              3,
				PrevLogEntry:      41,
				PrevLogTerm:       2,
				LeaderCommitIndex: 41,
			},
		},
		{
			"deprecated leader field",
			&raft.AppendEntriesRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: 1},
				Term:      1,
				Leader:    []byte("127.0.0.1:7001"),
			},
		},
		{
			"nil data",
			&raft.AppendEntriesRequest{
				RPCHeader: hdr,
				Term:      3,
				Entries:   []*raft.Log{{Index: 1, Term: 3, Type: raft.LogCommand}},
			},
		},
		{
			"empty data",
			&raft.AppendEntriesRequest{
				RPCHeader: hdr,
				Term:      3,
				Entries: []*raft.Log{
					{Index: 1, Term: 3, Type: raft.LogCommand, Data: []byte{}, Extensions: []byte{}},
				},
			},
		},
		{
			"large entry",
			&raft.AppendEntriesRequest{
				RPCHeader: hdr,
				Term:      3,
				Entries:   []*raft.Log{{Index: 9, Term: 3, Type: raft.LogCommand, Data: large, AppendedAt: at}},
			},
		},
		{
			"extensions",
			&raft.AppendEntriesRequest{
				RPCHeader: hdr,
				Term:      3,
				Entries: []*raft.Log{
					{Index: 9, Term: 3, Type: raft.LogCommand, Data: []byte("x"), Extensions: []byte{1, 2, 3}},
				},
			},
		},
		{
			"largest integers",
			&raft.AppendEntriesRequest{
				RPCHeader:         raft.RPCHeader{ProtocolVersion: -1},
				Term:              ^uint64(0),
				PrevLogEntry:      ^uint64(0),
				PrevLogTerm:       ^uint64(0),
				LeaderCommitIndex: ^uint64(0),
				Entries: []*raft.Log{
					{Index: ^uint64(0), Term: ^uint64(0), Type: raft.LogType(255), AppendedAt: time.Unix(0, -1)},
				},
			},
		},
		{
			"full batch",
			&raft.AppendEntriesRequest{
				RPCHeader:         hdr,
				Term:              7,
				PrevLogEntry:      999,
				PrevLogTerm:       7,
				LeaderCommitIndex: 1000,
				Entries:           full,
			},
		},
	}
	for _, typ := range []raft.LogType{
		raft.LogCommand, raft.LogNoop, raft.LogAddPeerDeprecated, raft.LogRemovePeerDeprecated, raft.LogBarrier,
		raft.LogConfiguration,
	} {
		data := []byte("command")
		if typ == raft.LogConfiguration {
			data = raft.EncodeConfiguration(
				raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:7001"}}},
			)
		}
		cases = append(cases, struct {
			name string
			req  *raft.AppendEntriesRequest
		}{"log type " + typ.String(), &raft.AppendEntriesRequest{
			RPCHeader: hdr, Term: 2, PrevLogEntry: 4, PrevLogTerm: 2, LeaderCommitIndex: 4,
			Entries: []*raft.Log{{Index: 5, Term: 2, Type: typ, Data: data, AppendedAt: at}},
		}})
	}
	return cases
}

// frameBody strips a frame's header after checking its length.
func frameBody(t *testing.T, frame []byte) []byte {
	t.Helper()
	if len(frame) < frameHeaderBytes {
		t.Fatalf("frame of %d bytes", len(frame))
	}
	if n := binary.BigEndian.Uint32(frame); int(n) != len(frame)-frameHeaderBytes {
		t.Fatalf("frame header says %d bytes, body has %d", n, len(frame)-frameHeaderBytes)
	}
	return frame[frameHeaderBytes:]
}

// sameTimes checks that got's entry times equal want's as instants, then
// makes them identical so that reflect.DeepEqual compares the rest (the
// decoded times are in the local zone, without a monotonic reading).
func sameTimes(t *testing.T, want, got []*raft.Log) {
	t.Helper()
	for i := range min(len(want), len(got)) {
		if !got[i].AppendedAt.Equal(want[i].AppendedAt) || got[i].AppendedAt.IsZero() != want[i].AppendedAt.IsZero() {
			t.Fatalf("entry %d AppendedAt %v, want %v", i, got[i].AppendedAt, want[i].AppendedAt)
		}
		got[i].AppendedAt = want[i].AppendedAt
	}
}

func TestAppendEntriesRequestRoundTrip(t *testing.T) {
	for _, tc := range appendEntriesCases() {
		t.Run(tc.name, func(t *testing.T) {
			frame, err := appendAppendEntriesRequest([]byte("prefix"), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(frame, []byte("prefix")) {
				t.Fatalf("the frame overwrote what b held")
			}
			got, err := decodeAppendEntriesRequest(frameBody(t, frame[len("prefix"):]))
			if err != nil {
				t.Fatal(err)
			}
			sameTimes(t, tc.req.Entries, got.Entries)
			if !reflect.DeepEqual(got, tc.req) {
				t.Fatalf("decoded %+v\nwant    %+v", got, tc.req)
			}
			// nil and empty byte strings keep their difference.
			for i, e := range tc.req.Entries {
				if (e.Data == nil) != (got.Entries[i].Data == nil) ||
					(e.Extensions == nil) != (got.Entries[i].Extensions == nil) {
					t.Fatalf("entry %d: nil-ness of Data/Extensions changed", i)
				}
			}
		})
	}
}

func TestAppendEntriesResponseRoundTrip(t *testing.T) {
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n2"), Addr: []byte("127.0.0.1:7002")}
	cases := []struct {
		name string
		resp raft.AppendEntriesResponse
		err  error
	}{
		{"empty", raft.AppendEntriesResponse{}, nil},
		{"success", raft.AppendEntriesResponse{RPCHeader: hdr, Term: 4, LastLog: 1064, Success: true}, nil},
		{
			"refused without backoff",
			raft.AppendEntriesResponse{RPCHeader: hdr, Term: 4, LastLog: 12, NoRetryBackoff: true},
			nil,
		},
		{
			"both flags",
			raft.AppendEntriesResponse{
				RPCHeader:      hdr,
				Term:           ^uint64(0),
				LastLog:        ^uint64(0),
				Success:        true,
				NoRetryBackoff: true,
			},
			nil,
		},
		{
			"raft error",
			raft.AppendEntriesResponse{RPCHeader: hdr, Term: 4},
			errors.New("unable to store logs: disk full"),
		},
		{"empty raft error", raft.AppendEntriesResponse{RPCHeader: hdr}, errors.New("")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frame, err := appendAppendEntriesResponse(nil, &tc.resp, tc.err)
			if err != nil {
				t.Fatal(err)
			}
			var got raft.AppendEntriesResponse
			remote, err := decodeAppendEntriesResponse(frameBody(t, frame), &got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.resp) {
				t.Fatalf("decoded %+v, want %+v", got, tc.resp)
			}
			switch {
			case tc.err == nil && remote != nil:
				t.Fatalf("remote error %q, want none", remote)
			case tc.err != nil && (remote == nil || remote.Error() != tc.err.Error()):
				t.Fatalf("remote error %v, want %q", remote, tc.err)
			}
		})
	}
}

// Malformed frames are refused with errFrameCorrupt and a message naming
// what is wrong, never a panic or a giant allocation.
func TestAppendEntriesFrameCorrupt(t *testing.T) {
	good, err := appendAppendEntriesRequest(nil, appendEntriesCases()[len(appendEntriesCases())-1].req)
	if err != nil {
		t.Fatal(err)
	}
	body := good[frameHeaderBytes:]
	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"wrong kind", append([]byte{9}, body[1:]...), "request kind 9"},
		{"truncated", body[:len(body)/2], "malformed"},
		{"trailing bytes", append(append([]byte{}, body...), 0), "1 bytes after the last field"},
		{
			"entry count past the body",
			binary.AppendUvarint([]byte{frameAppendEntries, 0, 0, 0, 0, 0, 0, 0, 0}, 1<<40),
			"entries in",
		},
		{"string past the body", []byte{frameAppendEntries, 0, 100}, "string with"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := decodeAppendEntriesRequest(tc.body)
			if !errors.Is(err, errFrameCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decode: %v (request %v), want errFrameCorrupt naming %q", err, req, tc.want)
			}
		})
	}
	var hdr [frameHeaderBytes]byte
	huge := binary.BigEndian.AppendUint32(nil, maxFrameBytes+1)
	if _, err := readFrame(bytes.NewReader(huge), &hdr); !errors.Is(err, errFrameCorrupt) {
		t.Fatalf("readFrame of a %d-byte frame: %v, want errFrameCorrupt", maxFrameBytes+1, err)
	}
}
