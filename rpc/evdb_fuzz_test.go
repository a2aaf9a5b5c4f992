package rpc

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/skalddb/skald/fsm"
)

// FuzzEventoDBRPC sends arbitrary bodies to /rpc of a real node: the
// server must never panic and never answer 5xx for input.
//
//	go test -run '^$' -fuzz FuzzEventoDBRPC -fuzztime 60s ./rpc
func FuzzEventoDBRPC(f *testing.F) {
	for _, seed := range []string{
		`["stream.write","a-1",{"type":"T","data":{}}]`,
		`["stream.write","a-1",{"type":"T","data":{"x":[1,2,{"y":null}]},"metadata":{"correlationStreamName":"w-1"}},{"expectedVersion":-1,"id":"0192f0c4-0000-7000-8000-000000000001"}]`,
		`["stream.get","a-1",{"position":-3,"batchSize":-1,"globalPosition":1e300}]`,
		`["category.get","",{"consumerGroup":{"member":1,"size":3},"correlation":"w"}]`,
		`["stream.last","a-1",{"type":""}]`, `["stream.version","a-1"]`, `["ns.streams",{"limit":1000,"cursor":"\u0000"}]`,
		`["ns.info","default"]`, `["ns.create","x.y_z-1",{"token":"ns_eA_00"}]`, `["sys.health"]`, `[]`, `[null]`, `{}`, `"x"`, ``,
		`["stream.write","\u0000",{"type":"T","data":{}}]`, `["category.get","a",{"batchSize":1.5e10}]`,
	} {
		f.Add([]byte(seed))
	}
	s := single(f)
	h := NewHandler(s.n, Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/rpc", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { h.ServeHTTP(rec, req); close(done) }()
		select {
		case <-done:
		case <-time.After(8 * time.Second):
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
			t.Fatalf("body %q: no answer in 8 s", body)
		}
		if rec.Code >= 500 {
			t.Fatalf("body %q: %d %s", body, rec.Code, rec.Body)
		}
	})
}

// FuzzImportLine feeds arbitrary lines to the NDJSON record parser: no
// panic, and anything it accepts is a record the state machine accepts
// under the strict input rules, with its text as sent (nothing read as
// U+FFFD that the line did not hold).
//
//	go test -run '^$' -fuzz FuzzImportLine -fuzztime 60s ./rpc
func FuzzImportLine(f *testing.F) {
	for _, seed := range []string{
		`{"id":"i","stream":"order-1","type":"Created","pos":0,"gpos":47,"data":{"a":1},"meta":null,"time":"2025-01-15T10:00:00Z"}`,
		`{"id":"i","stream":"order-1","type":"T","pos":3,"gpos":1,"data":{},"meta":{"k":"v"},"time":"2025-01-15T10:00:00.123456789Z"}`,
		`{"id":"i","stream":"","type":"T","pos":0,"gpos":1,"data":{},"time":"x"}`, `{`, `[]`, `null`, `{"pos":-1}`,
		`{"id":"i","stream":"s-1","type":"T","pos":4611686018427387903,"gpos":4611686018427387904,"data":{},"time":"9999-12-31T00:00:00Z"}`,
		"{\"id\":\"i\",\"stream\":\"s-\xff\",\"type\":\"T\\ud800\",\"pos\":0,\"gpos\":1,\"data\":{\"\xc3\":1},\"time\":\"2025-01-15T10:00:00Z\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, ierr := parseImportLine(line, 1)
		if (rec == nil) == (ierr == nil) {
			t.Fatalf("line %q: record %v and error %v", line, rec, ierr)
		}
		if rec == nil {
			return
		}
		if fsm.ValidateStreamName("s", rec.Stream) != nil || fsm.ValidateTypeName("t", rec.Type) != nil || !utf8.ValidString(rec.Id) || rec.Id == "" ||
			fsm.ValidateImportedPosition("p", rec.Position, 0) != nil || fsm.ValidateImportedPosition("g", rec.GlobalPosition, 1) != nil ||
			fsm.ValidateData("d", rec.Data) != nil || fsm.ValidateMetadata("m", rec.Metadata) != nil ||
			fsm.ValidateTime("t", time.Unix(0, rec.TimeUnixNano)) != nil {
			t.Fatalf("line %q accepted as invalid record %v", line, rec)
		}
		if !bytes.Contains(line, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(line), []byte(`\ufffd`)) &&
			strings.ContainsRune(rec.Id+rec.Stream+rec.Type, utf8.RuneError) {
			t.Fatalf("line %q accepted with text read as U+FFFD: %v", line, rec)
		}
	})
}
