package rpc

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"testing"
	"time"
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
