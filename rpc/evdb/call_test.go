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

// TestDecodeRPC: the envelope's method and arguments, and its refusals in
// EventoDB's words.
func TestDecodeRPC(t *testing.T) {
	for _, c := range []struct {
		body, method string
		args         int
		msg          string
	}{
		{`["stream.get","a-1",{}]`, "stream.get", 2, ""},
		{` [ "sys.health" ] `, "sys.health", 0, ""},
		{`[]`, "", 0, "empty request array: the first element must be the method name"},
		{`[1]`, "", 0, "the first element must be the method name (a string)"},
		{`[] []`, "", 0, "body must hold one JSON array"},
		{`{}`, "", 0, `body must be a JSON array ["method", args...]`},
	} {
		method, args, err := DecodeRPC(bytes.NewReader([]byte(c.body)))
		msg := ""
		if err != nil {
			msg = err.Message
		}
		if method != c.method || len(args) != c.args || msg != c.msg {
			t.Errorf("%s: %q %d %q, want %q %d %q", c.body, method, len(args), msg, c.method, c.args, c.msg)
		}
	}
}
