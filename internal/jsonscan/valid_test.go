package jsonscan

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
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

// refText is ValidText's extra rule for a valid JSON document, written
// apart from the scanner: b is UTF-8, and every \u escape of a surrogate
// is a high one directly followed by an escaped low one.
func refText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	unit := func(i int) rune { // the \u escape at b[i:], or -1
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return -1
		}
		r, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
		if err != nil {
			return -1
		}
		return rune(r)
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r := unit(i)
		switch {
		case r < 0:
			i++ // another escape: skip its letter
		case 0xd800 <= r && r < 0xdc00:
			if lo := unit(i + 6); lo < 0xdc00 || lo > 0xdfff {
				return false
			}
			i += 11
		case 0xdc00 <= r && r <= 0xdfff:
			return false // a low one without a high one before it
		default:
			i += 5
		}
	}
	return true
}

func TestValidText(t *testing.T) {
	cases := []struct {
		in     string
		want   bool
		path   string // BadText's path when refused
		inName bool
		offset int
	}{
		{`{"a":"x"}`, true, "", false, 0},
		{`{"note":"Zürich 東京 \u00e9 \ud83d\ude00 \uFFFD"}`, true, "", false, 0},
		{"\"\xff\"", false, "", false, 1},
		{"{\"note\":\"ab\xff\"}", false, ".note", false, 11},
		{"{\"a\":[1,{\"b c\":\"\xed\xa0\x80\"}]}", false, `.a[1]["b c"]`, false, 16}, // UTF-8 of a surrogate
		{"{\"k\xc3\":1}", false, "[\"k\ufffd\"]", true, 3},
		{`{"a":"\ud800"}`, false, ".a", false, 6},
		{`{"a":"\ud800x"}`, false, ".a", false, 6},
		{`{"a":"\ud800\n"}`, false, ".a", false, 6},
		{`{"a":"\ud800\ud800"}`, false, ".a", false, 6},
		{`{"a":"\udc00"}`, false, ".a", false, 6},
		{`["ok","\\ud800"]`, true, "", false, 0}, // an escaped backslash, then text
		{`{"a":"\uDBFF\uDFFF"}`, true, "", false, 0},
		{"{\"a\":\"\xf4\x90\x80\x80\"}", false, ".a", false, 6},                           // above U+10FFFF
		{"[\"\xc2\xa9 \xef\xbf\xbd \xf0\x9f\x98\x80 \xed\x9f\xbf\"]", true, "", false, 0}, // ©, U+FFFD, 😀, U+D7FF
		{"[\"\xc0\x80\"]", false, "[0]", false, 2},                                        // overlong NUL
		{"[\"\xe0\x80\xaf\"]", false, "[0]", false, 2},                                    // overlong '/'
		{"[\"ab\xe6\x9d\"]", false, "[0]", false, 4},                                      // truncated before the quote
		{"[\"\xe6\x9d\xb1\xe4\xba\"]", false, "[0]", false, 5},                            // 東, then a truncated one
		{"[\"\xdf\"]", false, "[0]", false, 2},                                            // a lead byte alone
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			if !json.Valid([]byte(tc.in)) {
				t.Fatalf("%q: not valid JSON: the table is wrong", tc.in)
			}
			if got := ValidText([]byte(tc.in)); got != tc.want {
				t.Fatalf("ValidText(%q) = %v, want %v", tc.in, got, tc.want)
			}
			if ref := refText([]byte(tc.in)); ref != tc.want {
				t.Fatalf("refText(%q) = %v: the table or refText is wrong", tc.in, ref)
			}
			e := BadText([]byte(tc.in))
			if tc.want {
				if e != nil {
					t.Fatalf("BadText(%q) = %v, want nil", tc.in, e)
				}
				return
			}
			if e == nil || e.Path != tc.path || e.InName != tc.inName || e.Offset != tc.offset {
				t.Fatalf("BadText(%q) = %+v, want path %q, in name %v, offset %d", tc.in, e, tc.path, tc.inName, tc.offset)
			}
		})
	}
}

// FuzzValidText holds ValidText to encoding/json.Valid plus refText, and
// BadText to it.
func FuzzValidText(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"\ud83d\ude00"}`, "\"\xff\"", `"\udc00"`, `["\ud800\u0041"]`, "{\"\xe2\x82\":0}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := json.Valid(b)
		want := valid && refText(b)
		if got := ValidText(b); got != want {
			t.Fatalf("ValidText(%q) = %v, want %v", b, got, want)
		}
		if valid {
			if e := BadText(b); (e == nil) != want {
				t.Fatalf("BadText(%q) = %v, ValidText %v", b, e, want)
			}
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	ascii := []byte(`{"amount": 1250, "currency": "EUR", "account": "acc-0042", "note": "monthly subscription renewal", "tags": ["billing", "recurring"], "at": "2026-11-24T20:19:05Z", "ok": true}`)
	utf8 := []byte(`{"amount": 1250, "currency": "EUR", "account": "acc-0042", "note": "Abo-Verlängerung für Zürich, 東京の支店", "tags": ["billing", "recurring"], "at": "2026-11-24T20:19:05Z", "ok": true}`)
	for _, bc := range []struct {
		name  string
		valid func([]byte) bool
	}{{"encoding/json", json.Valid}, {"Valid", Valid}, {"ValidText", ValidText}} {
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
