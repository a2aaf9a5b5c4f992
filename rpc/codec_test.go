package rpc

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestConnectJSONShowsZeroPositions: the first message of a stream has
// position 0, and Connect JSON replies say so instead of leaving the field
// out as proto3 JSON does by default.
func TestConnectJSONShowsZeroPositions(t *testing.T) {
	t.Parallel()
	s := single(t)
	call := func(method, body string, out any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+s.addr+"/skald.v1.EventStore/"+method, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", method, resp.StatusCode, err)
		}
	}
	var appended map[string]any
	call("Append", `{"stream":"zero-1","messages":[{"type":"T","data":"e30="}]}`, &appended)
	if appended["firstPosition"] != "0" || appended["lastPosition"] != "0" || appended["firstGlobalPosition"] != "1" {
		t.Fatalf("Append reply %v, want firstPosition and lastPosition \"0\"", appended)
	}
	var read struct{ Messages []map[string]any }
	call("ReadStream", `{"stream":"zero-1"}`, &read)
	if len(read.Messages) != 1 || read.Messages[0]["position"] != "0" || read.Messages[0]["globalPosition"] != "1" {
		t.Fatalf("ReadStream reply %v, want the message at position \"0\"", read.Messages)
	}
}
