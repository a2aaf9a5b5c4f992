package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// decoderFieldValue is how the index loop extracted a data field before
// the scanner (internal/jsonscan's Lookup): decode the whole document with encoding/json
// (UseNumber), walk the pointer through maps and slices, convert. The
// scanner must give its answers on every input.
func decoderFieldValue(t fsmv1.IndexFieldType, doc []byte, ptr string) (any, error) {
	if len(doc) == 0 {
		return nil, errFieldMissing
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, errFieldMissing
	}
	cur := root
	if ptr != "" {
		if ptr[0] != '/' {
			return nil, errFieldMissing
		}
		for _, tok := range strings.Split(ptr[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch c := cur.(type) {
			case map[string]any:
				v, ok := c[tok]
				if !ok {
					return nil, errFieldMissing
				}
				cur = v
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(c) || (len(tok) > 1 && tok[0] == '0') {
					return nil, errFieldMissing
				}
				cur = c[i]
			default:
				return nil, errFieldMissing
			}
		}
	}
	return jsonValue(t, cur)
}

// maxJSONDepth is encoding/json's nesting limit: deeper is invalid.
const maxJSONDepth = 10000

var allFieldTypes = []fsmv1.IndexFieldType{tString, tInt, fsmv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT, fsmv1.IndexFieldType_INDEX_FIELD_TYPE_TIME, fsmv1.IndexFieldType_INDEX_FIELD_TYPE_BOOL}

// scannerFieldValue is fieldValue on a message whose data is doc.
func scannerFieldValue(t fsmv1.IndexFieldType, doc []byte, ptr string) (any, error) {
	f := &fsmv1.IndexField{Source: fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_DATA, Pointer: ptr, Type: t}
	return fieldValue(f, &Message{Data: doc}, nil)
}

// checkSameAsDecoder fails t when the scanner and the decoder disagree on
// doc and ptr for any field type.
func checkSameAsDecoder(t *testing.T, doc []byte, ptr string) {
	t.Helper()
	for _, ft := range allFieldTypes {
		want, wantErr := decoderFieldValue(ft, doc, ptr)
		got, gotErr := scannerFieldValue(ft, doc, ptr)
		if !reflect.DeepEqual(got, want) || gotErr != wantErr {
			t.Fatalf("doc %q pointer %q type %v: scanner (%#v, %v), decoder (%#v, %v)", doc, ptr, ft, got, gotErr, want, wantErr)
		}
	}
}

// TestJSONPointerScanMatchesDecoder checks the scanner's value for each
// case, and that it is encoding/json's on every field type.
func TestJSONPointerScanMatchesDecoder(t *testing.T) {
	deep := func(n int, inner string) string { return strings.Repeat("[", n) + inner + strings.Repeat("]", n) }
	tf := fsmv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT
	tb := fsmv1.IndexFieldType_INDEX_FIELD_TYPE_BOOL
	tt := fsmv1.IndexFieldType_INDEX_FIELD_TYPE_TIME
	for _, tc := range []struct {
		name, doc, ptr string
		typ            fsmv1.IndexFieldType
		want           any // nil: missing or of another type
	}{
		{"string", `{"a":"x"}`, "/a", tString, "x"},
		{"white space", " \t\r\n{ \"a\" : \"x\" } ", "/a", tString, "x"},
		{"string escapes", `{"a":"q\"b\\s\/\b\f\n\r\t\u00e9\ud83d\ude00"}`, "/a", tString, "q\"b\\s/\b\f\n\r\té😀"},
		{"lone surrogate", `{"a":"\ud83dx"}`, "/a", tString, "\ufffdx"},
		{"invalid UTF-8 in a value", "{\"a\":\"\xff\"}", "/a", tString, "\ufffd"},
		{"invalid UTF-8 in a key", "{\"\xff\":\"v\"}", "/\ufffd", tString, "v"},
		{"escaped key", `{"\u0061b":"v"}`, "/ab", tString, "v"},
		{"key with a slash (~1)", `{"a/b":"v"}`, "/a~1b", tString, "v"},
		{"key with a tilde (~0)", `{"a~b":"v"}`, "/a~0b", tString, "v"},
		{"~01 is ~1, not /", `{"a~1b":"v","a/b":"w"}`, "/a~01b", tString, "v"},
		{"empty key", `{"":"v"}`, "/", tString, "v"},
		{"nested", `{"a":{"b":[1,{"c":"deep"}]}}`, "/a/b/1/c", tString, "deep"},
		{"int", `{"n":-42}`, "/n", tInt, int64(-42)},
		{"int from exponent is no int", `{"n":1e3}`, "/n", tInt, nil},
		{"int too big", `{"n":9223372036854775808}`, "/n", tInt, nil},
		{"int of a string", `{"n":"1"}`, "/n", tInt, nil},
		{"float", `{"n":-1.5e-3}`, "/n", tf, -1.5e-3},
		{"float overflow", `{"n":1e999}`, "/n", tf, nil},
		{"negative zero", `{"n":-0}`, "/n", tInt, int64(0)},
		{"bool", `{"b":true}`, "/b", tb, true},
		{"null is no bool", `{"b":null}`, "/b", tb, nil},
		{"object is no string", `{"a":{}}`, "/a", tString, nil},
		{"time", `{"t":"2026-11-26T04:00:00Z"}`, "/t", tt, int64(1795665600000000000)},
		{"duplicate key: the last wins", `{"a":"first","a":"last"}`, "/a", tString, "last"},
		{"duplicate key: the last wins at every level", `{"a":{"b":"x"},"a":{}}`, "/a/b", tString, nil},
		{"duplicate key: the last of a path", `{"a":{},"a":{"b":"x"}}`, "/a/b", tString, "x"},
		{"array index", `{"a":[10,20,30]}`, "/a/2", tInt, int64(30)},
		{"array index past the end", `{"a":[10]}`, "/a/1", tInt, nil},
		{"array index with a leading zero", `{"a":[10,20]}`, "/a/01", tInt, nil},
		{"array index +1 (Atoi)", `{"a":[10,20]}`, "/a/+1", tInt, int64(20)},
		{"array index -0 (Atoi)", `{"a":[10,20]}`, "/a/-0", tInt, int64(10)},
		{"array index -", `{"a":[10]}`, "/a/-", tInt, nil},
		{"key lookup in an array", `{"a":[10]}`, "/a/x", tInt, nil},
		{"through a scalar", `{"a":"s"}`, "/a/b", tString, nil},
		{"missing key", `{"a":1}`, "/b", tInt, nil},
		{"top-level array", `["x"]`, "/0", tString, "x"},
		{"trailing bytes are ignored", `{"a":"x"} garbage`, "/a", tString, "x"},
		{"trailing second value is ignored", `{"a":"x"}{"a":"y"}`, "/a", tString, "x"},
		{"invalid later in the document", `{"a":"x","b":[1,}`, "/a", tString, nil},
		{"unterminated", `{"a":"x"`, "/a", tString, nil},
		{"trailing comma", `{"a":"x",}`, "/a", tString, nil},
		{"single quotes", `{'a':"x"}`, "/a", tString, nil},
		{"bad escape", `{"a":"\x"}`, "/a", tString, nil},
		{"control byte in a string", "{\"a\":\"\x01\"}", "/a", tString, nil},
		{"number with a leading zero", `{"a":"x","n":01}`, "/a", tString, nil},
		{"number without digits after the point", `{"a":"x","n":1.}`, "/a", tString, nil},
		{"bad literal", `{"a":"x","b":tru}`, "/a", tString, nil},
		{"empty", ``, "/a", tString, nil},
		{"white space only", `  `, "/a", tString, nil},
		{"nesting at the limit", deep(maxJSONDepth-1, `{"a":"x"}`), "/" + strings.Repeat("0/", maxJSONDepth-1) + "a", tString, "x"},
		{"nesting past the limit", deep(maxJSONDepth, `{"a":"x"}`), "/" + strings.Repeat("0/", maxJSONDepth) + "a", tString, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scannerFieldValue(tc.typ, []byte(tc.doc), tc.ptr)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("got %#v, want missing or of another type", got)
				}
			} else if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got (%#v, %v), want %#v", got, err, tc.want)
			}
			checkSameAsDecoder(t, []byte(tc.doc), tc.ptr)
		})
	}
}

// FuzzJSONPointerScan compares the scanner with encoding/json on any
// document and pointer.
func FuzzJSONPointerScan(f *testing.F) {
	for _, seed := range []struct{ doc, ptr string }{
		{`{"a":"x"}`, "/a"},
		{`{"a":{"b":[1,{"c":"2026-11-26T04:00:00Z"}]}}`, "/a/b/1/c"},
		{`{"a~b":1,"a/b":2.5,"a":true}`, "/a~1b"},
		{`{"a":1,"a":{"b":null}}`, "/a/b"},
		{`[0,[1,[2]]] x`, "/1/1/0"},
		{`{"\u00e9\ud83d":"\ud800","":-0}`, "/"},
		{`{"n":1e309,"m":-1.0E-2}`, "/m"},
	} {
		f.Add([]byte(seed.doc), seed.ptr)
	}
	f.Fuzz(func(t *testing.T, doc []byte, ptr string) {
		if ptr == "" || ptr[0] != '/' {
			ptr = "/" + ptr // the pointers a definition may hold
		}
		checkSameAsDecoder(t, doc, ptr)
	})
}

// BenchmarkFieldValue extracts an int field from a small document: the
// scanner against encoding/json's decoding.
func BenchmarkFieldValue(b *testing.B) {
	doc := indexBenchData(4242)
	for _, bc := range []struct {
		name string
		fn   func(fsmv1.IndexFieldType, []byte, string) (any, error)
	}{{"scanner", scannerFieldValue}, {"decoder", decoderFieldValue}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if v, err := bc.fn(tInt, doc, "/amount"); err != nil || v.(int64) != int64((4242*7919)%1_000_000) {
					b.Fatal(fmt.Sprint(v, err))
				}
			}
		})
	}
}
