package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	cases := []struct {
		in   string
		want bool
	}{
		{`{}`, true},
		{` {"a": 1, "b": [true, false, null, -0.5e+10, "x\u00e9\n"]} `, true},
		{`{"a":{"b":{"c":[]}}}`, true},
		{`[]`, true},
		{`"s"`, true},
		{`-0`, true},
		{`1E5`, true},
		{`"\ud800"`, true},     // lone surrogate escape: accepted, as by encoding/json
		{"\"\xff\xfe\"", true}, // invalid UTF-8 inside a string: accepted, as by encoding/json
		{"\t\r\n{}\n", true},   // the four whitespace bytes
		{deep(10000), true},    // encoding/json's depth limit
		{deep(10001), false},   // one past it
		{``, false},
		{` `, false},
		{`{`, false},
		{`{"a"}`, false},
		{`{"a":}`, false},
		{`{"a":1,}`, false},
		{`[1,]`, false},
		{`{a:1}`, false},
		{`01`, false},
		{`1.`, false},
		{`.5`, false},
		{`1e`, false},
		{`-`, false},
		{`+1`, false},
		{`tru`, false},
		{`nul`, false},
		{`"\x"`, false},
		{`"\u12"`, false},
		{"\"a\x01\"", false}, // control byte in a string
		{"\v{}", false},      // vertical tab is not JSON whitespace
		{`{} {}`, false},
		{`{}x`, false},
		{"{}\x00", false},
	}
	for _, tc := range cases {
		name := tc.in
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			if got := Valid([]byte(tc.in)); got != tc.want {
				t.Fatalf("Valid(%q) = %v, want %v", name, got, tc.want)
			}
			if ref := json.Valid([]byte(tc.in)); ref != tc.want {
				t.Fatalf("encoding/json.Valid(%q) = %v: the table is wrong", name, ref)
			}
		})
	}
}

// FuzzValidJSON holds Valid equal to encoding/json.Valid: apply
// decides with it, and replicas of different versions must agree.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.5e-3,"x\"y",true,null]}`, `[`, `"\u00zz"`, `-01`, "{\"\x7f\":1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json.Valid = %v", b, got, want)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	ascii := []byte(`{"amount": 1250, "currency": "EUR", "account": "acc-0042", "note": "monthly subscription renewal", "tags": ["billing", "recurring"], "at": "2026-11-24T20:19:05Z", "ok": true}`)
	utf8 := []byte(`{"amount": 1250, "currency": "EUR", "account": "acc-0042", "note": "Abo-Verlängerung für Zürich, 東京の支店", "tags": ["billing", "recurring"], "at": "2026-11-24T20:19:05Z", "ok": true}`)
	for _, bc := range []struct {
		name  string
		valid func([]byte) bool
	}{{"encoding/json", json.Valid}, {"Valid", Valid}} {
		for _, msg := range []struct {
			name string
			b    []byte
		}{{"ascii", ascii}, {"utf8", utf8}} {
			b.Run(bc.name+"/"+msg.name, func(b *testing.B) {
				b.SetBytes(int64(len(msg.b)))
				for b.Loop() {
					if !bc.valid(msg.b) {
						b.Fatal("invalid")
					}
				}
			})
		}
	}
}
