package logbridge

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func jsonLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestStd: memberlist's and net/http's lines lose their level tag and
// name prefix, and the tag sets the level.
func TestStd(t *testing.T) {
	cases := []struct{ name, line, level, msg string }{
		{"memberlist", "[INFO] memberlist: Suspect node2 has failed, no acks received", "INFO", "Suspect node2 has failed, no acks received"},
		{"memberlist", "[WARN] memberlist: Was able to connect to node2 over TCP but UDP probes failed", "WARN", "Was able to connect to node2 over TCP but UDP probes failed"},
		{"memberlist", "[ERR] memberlist: Failed to send ping: write: broken pipe", "ERROR", "Failed to send ping: write: broken pipe"},
		{"memberlist", "[DEBUG] memberlist: Stream connection from=127.0.0.1:5", "DEBUG", "Stream connection from=127.0.0.1:5"},
		{"http", "http: TLS handshake error from 127.0.0.1:5: EOF", "WARN", "TLS handshake error from 127.0.0.1:5: EOF"},
	}
	for _, tc := range cases {
		var buf bytes.Buffer
		Std(jsonLogger(&buf), tc.name, slog.LevelWarn).Print(tc.line)
		var got map[string]any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("%q: not one JSON line: %s", tc.line, buf.String())
		}
		if got["level"] != tc.level || got["msg"] != tc.msg || got["component"] != tc.name {
			t.Fatalf("%q logged %v, want level %s, msg %q, component %s", tc.line, got, tc.level, tc.msg, tc.name)
		}
	}
}

// TestHCLogFormats: hclog.Fmt values are rendered, Raft's server lists
// as objects.
func TestHCLogFormats(t *testing.T) {
	var buf bytes.Buffer
	l := HCLog(jsonLogger(&buf), "raft")
	l.Info("initial configuration", "index", 3, "servers", hclog.Fmt("%+v", []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: "127.0.0.1:1"}}),
		"percent-complete", hclog.Fmt("%0.2f%%", 12.5))
	var got struct {
		Msg, Component string
		Servers        []map[string]string
		Percent        string `json:"percent-complete"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("not one JSON line: %s", buf.String())
	}
	want := map[string]string{"id": "a", "address": "127.0.0.1:1", "suffrage": "Voter"}
	if got.Msg != "initial configuration" || got.Component != "raft" || len(got.Servers) != 1 || got.Percent != "12.50%" {
		t.Fatalf("logged %s", buf.String())
	}
	for k, v := range want {
		if got.Servers[0][k] != v {
			t.Fatalf("server %v, want %v", got.Servers[0], want)
		}
	}
}
