package rpc

import (
	"bytes"
	"fmt"
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
// message end to end. The -x16 runs have 16 callers, one connection each,
// and report the whole process's CPU per call (cpu-ns/op).
//
//	go test -run '^$' -bench EvdbRPC -count 6 ./rpc
func BenchmarkEvdbRPC(b *testing.B) {
	s := single(b)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	call := func(body string) error {
		req, err := http.NewRequest(http.MethodPost, "http://"+s.addr+"/rpc", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		reply, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d %s %v", body, resp.StatusCode, reply, err)
		}
		return nil
	}
	note := strings.Repeat("x", 180)
	write := `["stream.write","account-1",{"type":"Deposited","data":{"note":"` + note + `"}}]`
	if err := call(write); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, body string }{
		{"version", `["stream.version","account-1"]`},
		{"write", write},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := call(bc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"-x16", func(b *testing.B) { // 16 callers, a connection each
			b.ReportAllocs()
			b.SetParallelism(8)
			cpu0 := processCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := call(bc.body); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
