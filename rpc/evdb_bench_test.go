package rpc

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

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
