package jsonscan

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Pointer lookup for the index loop, which extracts one field of every
// message it reads. An index field names one value of a message's JSON
// data or metadata by an RFC 6901 pointer; Lookup finds that value by
// scanning the document's bytes, allocating nothing for the parts it
// passes over. Its answers are encoding/json's on every input (the index
// engine's tests compare the two, and fuzz them):
//
//   - the document is what json.Decoder.Decode reads: leading white space,
//     then one JSON value, which must be valid throughout (an invalid value
//     anywhere, or nesting deeper than encoding/json's 10,000 levels,
//     makes every pointer name nothing); bytes after that value are ignored;
//   - in an object the last of duplicate keys wins (as decoding into a map
//     does), at every level: {"a":{"b":1},"a":{}} has no /a/b;
//   - keys compare after unescaping (\u escapes, invalid UTF-8 read as
//     U+FFFD), the pointer's tokens after ~1 -> / and ~0 -> ~;
//   - an array index is a token strconv.Atoi reads as 0..len-1 without a
//     leading zero (so "+1" and "-0" are indexes);
//   - the value found is what decoding with UseNumber gives: strings
//     unescaped as encoding/json does, numbers as json.Number of their text.

// jsonKind is the kind of a JSON value found by the scanner.
type jsonKind uint8

const (
	jsonNone jsonKind = iota
	jsonString
	jsonNumber
	jsonTrue
	jsonFalse
	jsonNull
	jsonObject
	jsonArray
)

// jsonFound is the value a pointer names: its kind and its bytes in the
// document (a string's with its quotes).
type jsonFound struct {
	kind jsonKind
	raw  []byte
}

// PointerTokens splits an RFC 6901 pointer ("/a/b~1c") into its unescaped
// reference tokens; "" is the whole document (no token). Lookup takes
// them, so a caller that looks one pointer up in many documents splits it
// once.
func PointerTokens(ptr string) []string {
	if ptr == "" {
		return nil
	}
	toks := strings.Split(ptr[1:], "/")
	for i, tok := range toks {
		if strings.IndexByte(tok, '~') >= 0 {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		}
	}
	return toks
}

// arrayIndex is the array index token tok names (ok false when it names
// none): what strconv.Atoi reads as 0 or more, without a leading zero.
func arrayIndex(tok string) (int, bool) {
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	return i, true
}

// scanPointer finds the value toks name in doc. valid is false when doc
// does not start (after white space) with one valid JSON value; found is
// the zero jsonFound when the value is valid but the pointer names
// nothing.
func scanPointer(doc []byte, toks []string) (found jsonFound, valid bool) {
	p := jsonScanner{doc: doc, toks: toks}
	p.skipSpace()
	f, ok := p.value(0, true)
	if !ok {
		return jsonFound{}, false
	}
	return f, true
}

// jsonScanner is one pass of scanPointer over a document.
type jsonScanner struct {
	doc  []byte
	i    int
	toks []string
}

func (p *jsonScanner) skipSpace() {
	for p.i < len(p.doc) {
		switch p.doc[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value scans the value at p.i (white space before it skipped already)
// at nesting depth (the containers around it). on: the path down to it
// is the pointer's first depth tokens, so it or a value inside it may be
// the one named. It returns the value named (in it, or it when depth ==
// len(toks) and on), and ok false when the document is invalid.
func (p *jsonScanner) value(depth int, on bool) (jsonFound, bool) {
	if p.i >= len(p.doc) {
		return jsonFound{}, false
	}
	start := p.i
	var kind jsonKind
	var found jsonFound
	switch c := p.doc[p.i]; {
	case c == '{' || c == '[':
		scan := p.object
		kind = jsonObject
		if c == '[' {
			kind, scan = jsonArray, p.array
		}
		f, ok := scan(depth+1, on && depth < len(p.toks))
		if !ok {
			return jsonFound{}, false
		}
		found = f
	case c == '"':
		kind = jsonString
		if _, ok := p.str(); !ok {
			return jsonFound{}, false
		}
	case c == '-' || (c >= '0' && c <= '9'):
		kind = jsonNumber
		if !p.number() {
			return jsonFound{}, false
		}
	case c == 't':
		kind = jsonTrue
		if !p.literal("true") {
			return jsonFound{}, false
		}
	case c == 'f':
		kind = jsonFalse
		if !p.literal("false") {
			return jsonFound{}, false
		}
	case c == 'n':
		kind = jsonNull
		if !p.literal("null") {
			return jsonFound{}, false
		}
	default:
		return jsonFound{}, false
	}
	if on && depth == len(p.toks) {
		return jsonFound{kind: kind, raw: p.doc[start:p.i]}, true
	}
	return found, true
}

// object scans an object at p.i; inner is the depth of its members. on:
// the object is on the pointer's path, and its members are looked up by
// toks[inner-1].
func (p *jsonScanner) object(inner int, on bool) (jsonFound, bool) {
	if inner > maxJSONDepth {
		return jsonFound{}, false
	}
	p.i++ // {
	var found jsonFound
	p.skipSpace()
	if p.i < len(p.doc) && p.doc[p.i] == '}' {
		p.i++
		return found, true
	}
	for {
		if p.i >= len(p.doc) || p.doc[p.i] != '"' {
			return jsonFound{}, false
		}
		key, ok := p.str()
		if !ok {
			return jsonFound{}, false
		}
		p.skipSpace()
		if p.i >= len(p.doc) || p.doc[p.i] != ':' {
			return jsonFound{}, false
		}
		p.i++
		p.skipSpace()
		match := on && keyEquals(key, p.toks[inner-1])
		f, ok := p.value(inner, match)
		if !ok {
			return jsonFound{}, false
		}
		if match {
			found = f // the last of duplicate keys wins, found or not
		}
		if more, ok := p.separator('}'); !ok {
			return jsonFound{}, false
		} else if !more {
			return found, true
		}
	}
}

// array scans an array at p.i, as object does.
func (p *jsonScanner) array(inner int, on bool) (jsonFound, bool) {
	if inner > maxJSONDepth {
		return jsonFound{}, false
	}
	p.i++ // [
	want := -1
	if on {
		if i, ok := arrayIndex(p.toks[inner-1]); ok {
			want = i
		}
	}
	var found jsonFound
	p.skipSpace()
	if p.i < len(p.doc) && p.doc[p.i] == ']' {
		p.i++
		return found, true
	}
	for n := 0; ; n++ {
		f, ok := p.value(inner, n == want)
		if !ok {
			return jsonFound{}, false
		}
		if n == want {
			found = f
		}
		if more, ok := p.separator(']'); !ok {
			return jsonFound{}, false
		} else if !more {
			return found, true
		}
	}
}

// separator passes what follows a member of an object or an element of
// an array: a ',' (more: true) or the closing byte end (more: false). ok
// is false for anything else: a syntax error.
func (p *jsonScanner) separator(end byte) (more, ok bool) {
	p.skipSpace()
	if p.i >= len(p.doc) {
		return false, false
	}
	switch p.doc[p.i] {
	case ',':
		p.i++
		p.skipSpace()
		return true, true
	case end:
		p.i++
		return false, true
	}
	return false, false
}

// str scans a string at p.i and returns its bytes with the quotes.
func (p *jsonScanner) str() ([]byte, bool) {
	start := p.i
	p.i++ // "
	for p.i < len(p.doc) {
		c := p.doc[p.i]
		switch {
		case c == '"':
			p.i++
			return p.doc[start:p.i], true
		case c == '\\':
			if p.i+1 >= len(p.doc) {
				return nil, false
			}
			switch p.doc[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.doc) {
					return nil, false
				}
				for _, h := range p.doc[p.i+2 : p.i+6] {
					if !isHex(h) {
						return nil, false
					}
				}
				p.i += 6
			default:
				return nil, false
			}
		case c < 0x20:
			return nil, false
		default:
			p.i++
		}
	}
	return nil, false
}

// number scans a number at p.i: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonScanner) number() bool {
	d := p.doc
	if d[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i >= len(d):
		return false
	case d[p.i] == '0':
		p.i++
	case d[p.i] >= '1' && d[p.i] <= '9':
		p.digits()
	default:
		return false
	}
	if p.i < len(d) && d[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return false
		}
	}
	if p.i < len(d) && (d[p.i] == 'e' || d[p.i] == 'E') {
		p.i++
		if p.i < len(d) && (d[p.i] == '+' || d[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return false
		}
	}
	return true
}

func (p *jsonScanner) digits() int {
	n := 0
	for p.i < len(p.doc) && p.doc[p.i] >= '0' && p.doc[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

func (p *jsonScanner) literal(lit string) bool {
	if len(p.doc)-p.i < len(lit) || string(p.doc[p.i:p.i+len(lit)]) != lit {
		return false
	}
	p.i += len(lit)
	return true
}

// keyEquals reports whether the quoted key raw, unescaped as
// encoding/json does, is tok. Keys without escapes and of valid UTF-8
// compare as bytes; the rest are unescaped by encoding/json itself.
func keyEquals(raw []byte, tok string) bool {
	body := raw[1 : len(raw)-1]
	if plainString(body) {
		return string(body) == tok
	}
	s, ok := unquoteJSON(raw)
	return ok && s == tok
}

// plainString reports whether a string's body reads as itself: no escape
// and valid UTF-8 (encoding/json reads invalid bytes as U+FFFD).
func plainString(body []byte) bool {
	for i, c := range body {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			return utf8.Valid(body[i:]) && !containsByte(body[i:], '\\')
		}
	}
	return true
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// unquoteJSON is the string a valid quoted JSON string reads as.
func unquoteJSON(raw []byte) (string, bool) {
	if body := raw[1 : len(raw)-1]; plainString(body) {
		return string(body), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// Lookup returns the value the pointer tokens toks (PointerTokens) name in
// doc, as decoding doc with UseNumber would give it: a string, a
// json.Number or a bool, or, for null, an object or an array, a value of
// none of those types (struct{}{}). ok is false when doc is not one valid
// JSON value (after white space) or the pointer names nothing in it.
func Lookup(doc []byte, toks []string) (v any, ok bool) {
	found, valid := scanPointer(doc, toks)
	if !valid || found.kind == jsonNone {
		return nil, false
	}
	return scannedValue(found)
}

// scannedValue converts the value found to what Lookup returns.
func scannedValue(f jsonFound) (any, bool) {
	switch f.kind {
	case jsonString:
		return unquoteJSON(f.raw)
	case jsonNumber:
		return json.Number(f.raw), true
	case jsonTrue:
		return true, true
	case jsonFalse:
		return false, true
	case jsonNull, jsonObject, jsonArray:
		return struct{}{}, true
	}
	return nil, false
}
