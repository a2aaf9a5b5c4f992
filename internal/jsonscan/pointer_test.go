package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// decoded is what Lookup must answer for toks in doc: decode the document
// with encoding/json (UseNumber) and walk the tokens through maps and
// slices. Null, objects and arrays are struct{}{}.
func decoded(doc []byte, toks []string) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var cur any
	if err := dec.Decode(&cur); err != nil {
		return nil, false
	}
	for _, tok := range toks {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, ok := arrayIndex(tok)
			if !ok || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	switch cur.(type) {
	case string, json.Number, bool:
		return cur, true
	}
	return struct{}{}, true
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		doc, ptr string
		want     any // nil: names nothing
	}{
		{`{"a":{"b":"x"}}`, "/a/b", "x"},
		{`{"a":[1,{"c":true}]}`, "/a/1/c", true},
		{`{"a":1.5e3}`, "/a", json.Number("1.5e3")},
		{`{"a/b":{"~":"y"}}`, "/a~1b/~0", "y"},
		{`{"a":null}`, "/a", struct{}{}},
		{`{"a":{"b":1},"a":{}}`, "/a/b", nil},
		{`{"a":[1,2]}`, "/a/01", nil},
		{`{"a":"\u00e9"}`, "/a", "é"},
		{`{"a":"x",}`, "/a", nil},
		{`  "whole"  trailing`, "", "whole"},
	} {
		got, ok := Lookup([]byte(tc.doc), PointerTokens(tc.ptr))
		if tc.want == nil {
			if ok {
				t.Errorf("Lookup(%s, %q) = %#v, want nothing", tc.doc, tc.ptr, got)
			}
			continue
		}
		if !ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Lookup(%s, %q) = %#v, %v; want %#v", tc.doc, tc.ptr, got, ok, tc.want)
		}
		if d, dok := decoded([]byte(tc.doc), PointerTokens(tc.ptr)); !dok || !reflect.DeepEqual(d, got) {
			t.Errorf("encoding/json reads %s at %q as %#v, %v; Lookup %#v", tc.doc, tc.ptr, d, dok, got)
		}
	}
}

// FuzzLookup holds Lookup to encoding/json's answer on every document.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{`{"a":{"b":"x"}}`, `[1,[2,{"a":null}]]`, `{"a":"\ud800"}`, `{"a":1,"a":{"b":2}}`} {
		f.Add([]byte(s), "/a/b")
	}
	f.Fuzz(func(t *testing.T, doc []byte, ptr string) {
		if ptr != "" && ptr[0] != '/' {
			ptr = "/" + ptr
		}
		toks := PointerTokens(ptr)
		got, ok := Lookup(doc, toks)
		want, wok := decoded(doc, toks)
		if ok != wok || (ok && !reflect.DeepEqual(got, want)) {
			t.Fatalf("Lookup(%q, %q) = %#v, %v; encoding/json %#v, %v", doc, ptr, got, ok, want, wok)
		}
	})
}
