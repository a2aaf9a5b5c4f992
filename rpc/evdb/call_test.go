package evdb

import (
	"bytes"
	"testing"
)

// BenchmarkDecodeRPCWrite is the EventoDB write path's work before the
// append is proposed: DecodeRPC splits a stream.write body (a 200-byte
// data object, ASCII and with non-ASCII text) and checks it.
//
//	go test -run '^$' -bench DecodeRPCWrite -count 6 ./rpc/evdb
func BenchmarkDecodeRPCWrite(b *testing.B) {
	for _, bc := range []struct{ name, note string }{
		{"ascii", "monthly subscription renewal, card ending 4242"},
		{"utf8", "Abo-Verlängerung für Zürich, 東京の支店, señal"},
	} {
		body := []byte(`["stream.write","account-0042",{"type":"Deposited","data":{"amount":1250,"currency":"EUR",` +
			`"account":"acc-0042","note":"` + bc.note + `","tags":["billing","recurring"],"at":"2026-11-24T20:19:05Z",` +
			`"ok":true},"metadata":{"correlationStreamName":"billing-7"}},{"expectedVersion":41}]`)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				method, args, everr := DecodeRPC(bytes.NewReader(body))
				if everr != nil || method != "stream.write" || len(args) != 3 {
					b.Fatalf("decoded %q %d args, %v", method, len(args), everr)
				}
			}
		})
	}
}
