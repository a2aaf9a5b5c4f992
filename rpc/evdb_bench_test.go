package rpc

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkDecodeRPCWrite is the EventoDB write path's work before the
// append is proposed: decodeRPC splits a stream.write body (a 200-byte
// data object, ASCII and with non-ASCII text) and checks it.
//
//	go test -run '^$' -bench DecodeRPCWrite -count 6 ./rpc
func BenchmarkDecodeRPCWrite(b *testing.B) {
	for _, bc := range []struct{ name, note string }{
		{"ascii", "monthly subscription renewal, card ending 4242"},
		{"utf8", "Abo-Verlängerung für Zürich, 東京の支店, señal"},
	} {
		body := []byte(`["stream.write","account-0042",{"type":"Deposited","data":{"amount":1250,"currency":"EUR","account":"acc-0042","note":"` +
			bc.note + `","tags":["billing","recurring"],"at":"2026-11-24T20:19:05Z","ok":true},"metadata":{"correlationStreamName":"billing-7"}},{"expectedVersion":41}]`)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				method, args, everr := decodeRPC(bytes.NewReader(body))
				if everr != nil || method != "stream.write" || len(args) != 3 {
					b.Fatalf("decoded %q %d args, %v", method, len(args), everr)
				}
			}
		})
	}
}

// BenchmarkEvdbRPC is one EventoDB SDK call over HTTP/1.1 keep-alive, as
// the SDKs make it (POST /rpc, bearer token, a JSON reply): the whole
// HTTP/1.1 path of the server (net/http, authentication, decoding,
// dispatch, the reply) on one real node. "version" reads (no Raft round
// trip), so what it costs is the path itself; "write" appends one 200-byte
// message end to end.
//
//	go test -run '^$' -bench EvdbRPC -count 6 ./rpc
func BenchmarkEvdbRPC(b *testing.B) {
	s := single(b)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	call := func(b *testing.B, body string) {
		req, err := http.NewRequest(http.MethodPost, "http://"+s.addr+"/rpc", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		reply, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d %s %v", body, resp.StatusCode, reply, err)
		}
	}
	note := strings.Repeat("x", 180)
	write := `["stream.write","account-1",{"type":"Deposited","data":{"note":"` + note + `"}}]`
	call(b, write)
	for _, bc := range []struct{ name, body string }{
		{"version", `["stream.version","account-1"]`},
		{"write", write},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				call(b, bc.body)
			}
		})
	}
}
