package jsonscan

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

func TestElements(t *testing.T) {
	cases := []struct {
		in   string
		want []string // nil: not ok
	}{
		{`["stream.write","acct-1",{"type":"T","data":{}}]`, []string{`"stream.write"`, `"acct-1"`, `{"type":"T","data":{}}`}},
		{" [ 1 , [2] ,\n{\"a\" : null} ] \n", []string{`1`, `[2]`, `{"a" : null}`}},
		{`[]`, []string{}},
		{`[1,]`, nil},
		{`[1 2]`, nil},
		{`[1] [2]`, nil},
		{`{"a":1}`, nil},
		{`null`, nil},
		{`[`, nil},
		{``, nil},
		{`["é","\ud83d\ude00"]`, []string{`"é"`, `"\ud83d\ude00"`}}, // UTF-8 and a surrogate pair
		{"[\"\xff\"]", nil},       // invalid UTF-8: encoding/json would read U+FFFD
		{`["\ud800"]`, nil},       // unpaired high surrogate escape
		{`["\udc00\ud800"]`, nil}, // low before high
		{"[{\"k\xc3\":1}]", nil},  // in a member name (truncated sequence)
	}
	for _, tc := range cases {
		got, ok := Elements([]byte(tc.in))
		if ok != (tc.want != nil) {
			t.Errorf("Elements(%q): ok %v, want %v", tc.in, ok, tc.want != nil)
			continue
		}
		var gs []string
		for _, e := range got {
			gs = append(gs, string(e))
		}
		if ok && !slices.Equal(gs, tc.want) && !(len(gs) == 0 && len(tc.want) == 0) {
			t.Errorf("Elements(%q) = %q, want %q", tc.in, gs, tc.want)
		}
	}
}

func TestMembers(t *testing.T) {
	cases := []struct {
		in   string
		want map[string]string // nil: not ok
	}{
		{`{"type":"Deposited","data":{"a":[1,2]},"metadata":null}`, map[string]string{"type": `"Deposited"`, "data": `{"a":[1,2]}`, "metadata": `null`}},
		{` { "a" : 1 , "a" : 2 } `, map[string]string{"a": `2`}}, // last wins, as encoding/json
		{`{}`, map[string]string{}},
		{`{"t\u0079pe":"x"}`, nil}, // escaped name: encoding/json decides
		{`{"é":1}`, nil},
		{`{"a":1,}`, nil},
		{`{"a" 1}`, nil},
		{`[1]`, nil},
		{`{"a":1}x`, nil},
	}
	for _, tc := range cases {
		got, ok := Members([]byte(tc.in))
		if ok != (tc.want != nil) {
			t.Errorf("Members(%q): ok %v, want %v", tc.in, ok, tc.want != nil)
			continue
		}
		gs := map[string]string{}
		for k, v := range got {
			gs[k] = string(v)
		}
		if ok && !maps.Equal(gs, tc.want) {
			t.Errorf("Members(%q) = %q, want %q", tc.in, gs, tc.want)
		}
	}
}

func TestStringAndCompact(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{`"stream.write"`, "stream.write", true},
		{`""`, "", true},
		{`"a\"b"`, "", false},
		{`"é"`, "", false},
		{`1`, "", false},
	} {
		if got, ok := String([]byte(tc.in)); got != tc.want || ok != tc.ok {
			t.Errorf("String(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	for _, in := range []string{`{"a":1}`, "{ \"a\" :\t[1, 2],\n\"b\":\"x y\\\" z\" }", `" spaces inside "`} {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatal(err)
		}
		if got := Compact([]byte(in)); string(got) != want.String() {
			t.Errorf("Compact(%q) = %q, want %q", in, got, want.String())
		}
	}
}

// The splitters accept exactly what encoding/json accepts (or decline)
// and return what it returns: the EventoDB API falls back to
// encoding/json whenever they decline.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{`["stream.write","s-1",{"type":"T","data":{"a":1}},{"expectedVersion":-1}]`,
		`{"type":"T","data":{},"metadata":{"x":" y "}}`, `[ "a" , {"b" : [1, 2 ] } ]`, `{"a\u0062":1}`, `"\u0041"`, `[1,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		trimmed := bytes.TrimLeft(b, " \t\r\n")
		valid := json.Valid(b)

		// Elements also refuses bad text: what encoding/json would read
		// with U+FFFD (refText is the rule written independently).
		elems, ok := Elements(b)
		isArray := valid && len(trimmed) > 0 && trimmed[0] == '[' && refText(b)
		if ok != isArray {
			t.Fatalf("Elements(%q) ok %v, encoding/json says array of text %v", b, ok, isArray)
		}
		if ok {
			var ref []json.RawMessage
			if err := json.Unmarshal(b, &ref); err != nil || len(ref) != len(elems) {
				t.Fatalf("Elements(%q) = %q, encoding/json %q, %v", b, elems, ref, err)
			}
			for i := range ref {
				if !bytes.Equal(ref[i], elems[i]) {
					t.Fatalf("Elements(%q)[%d] = %q, encoding/json %q", b, i, elems[i], ref[i])
				}
			}
		}

		members, ok := Members(b)
		isObject := valid && len(trimmed) > 0 && trimmed[0] == '{'
		if ok && !isObject {
			t.Fatalf("Members(%q) accepted what is not one object", b)
		}
		if ok {
			var ref map[string]json.RawMessage
			if err := json.Unmarshal(b, &ref); err != nil || len(ref) != len(members) {
				t.Fatalf("Members(%q) = %q, encoding/json %q, %v", b, members, ref, err)
			}
			for k, v := range ref {
				if !bytes.Equal(members[k], v) {
					t.Fatalf("Members(%q)[%q] = %q, encoding/json %q", b, k, members[k], v)
				}
			}
		}

		if s, ok := String(b); ok {
			var ref string
			if err := json.Unmarshal(b, &ref); err != nil || ref != s {
				t.Fatalf("String(%q) = %q, encoding/json %q, %v", b, s, ref, err)
			}
		}

		if valid {
			var ref bytes.Buffer
			json.Compact(&ref, b)
			if got := Compact(b); !bytes.Equal(got, ref.Bytes()) {
				t.Fatalf("Compact(%q) = %q, encoding/json %q", b, got, ref.Bytes())
			}
		}
	})
}

// BenchmarkElements splits a typical EventoDB stream.write body (a
// 200-byte data object), ASCII and with non-ASCII text.
func BenchmarkElements(b *testing.B) {
	for _, bc := range []struct{ name, note string }{
		{"ascii", "monthly subscription renewal, card ending 4242"},
		{"utf8", "Abo-Verlängerung für Zürich, 東京の支店, señal"},
	} {
		body := []byte(`["stream.write","account-0042",{"type":"Deposited","data":{"amount":1250,"currency":"EUR","account":"acc-0042","note":"` +
			bc.note + `","tags":["billing","recurring"],"at":"2026-11-24T20:19:05Z","ok":true},"metadata":{"correlationStreamName":"billing-7"}},{"expectedVersion":41}]`)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, ok := Elements(body); !ok {
					b.Fatal("not split")
				}
			}
		})
	}
}
