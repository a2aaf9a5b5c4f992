package jsonscan

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Valid reports whether b is one valid JSON value with optional
// surrounding whitespace, exactly as encoding/json.Valid does (same
// grammar, same whitespace set, same limit of maxJSONDepth nested arrays
// and objects, bytes of strings not checked as UTF-8). Apply runs it on
// every message of every replica, so it must never disagree with the
// encoding/json.Valid that earlier versions applied entries with
// (FuzzValidJSON holds the two equal); it is a hand-written scanner
// because encoding/json's table of state functions cost about a tenth
// of a follower's CPU under batched appends.
func Valid(b []byte) bool {
	v := jsonValidator{b: b}
	v.space()
	if !v.value(0) {
		return false
	}
	v.space()
	return v.i == len(v.b)
}

// ValidText reports whether b is valid per Valid and also text that
// every JSON decoder reads alike (RFC 8259 §8.1, §8.2; I-JSON, RFC 7493
// §2.1): its strings are UTF-8, and every \u escape of a UTF-16
// surrogate is half of a pair (a high one followed by a low one).
// encoding/json would read a string failing either as one holding
// U+FFFD, other decoders refuse the document or yield text that cannot
// be encoded again; the API edges and apply (for entries of the strict
// input rules) refuse it instead. BadText says where it fails.
func ValidText(b []byte) bool {
	v := jsonValidator{b: b, text: true}
	v.space()
	if !v.value(0) {
		return false
	}
	v.space()
	return v.i == len(v.b)
}

// maxJSONDepth is encoding/json's maxNestingDepth.
const maxJSONDepth = 10000

type jsonValidator struct {
	b []byte
	i int
	// text: strings must also be text (ValidText).
	text bool
}

func (v *jsonValidator) space() {
	b, i := v.b, v.i
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	v.i = i
}

// value scans one value at v.i; depth is the number of enclosing arrays
// and objects.
func (v *jsonValidator) value(depth int) bool {
	if v.i >= len(v.b) {
		return false
	}
	switch c := v.b[v.i]; {
	case c == '{':
		return v.container(depth+1, '}')
	case c == '[':
		return v.container(depth+1, ']')
	case c == '"':
		if v.text { // here, not in str: str stays as fast as it was
			return v.textStr()
		}
		return v.str()
	case c == '-' || '0' <= c && c <= '9':
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	}
	return false
}

func (v *jsonValidator) literal(lit string) bool {
	if len(v.b)-v.i < len(lit) || string(v.b[v.i:v.i+len(lit)]) != lit {
		return false
	}
	v.i += len(lit)
	return true
}

// container scans an object (close '}') or an array (close ']') starting
// at its opening bracket; depth counts it.
func (v *jsonValidator) container(depth int, close byte) bool {
	if depth > maxJSONDepth {
		return false
	}
	v.i++ // { or [
	v.space()
	if v.i < len(v.b) && v.b[v.i] == close {
		v.i++
		return true
	}
	for {
		if close == '}' && !v.key() {
			return false
		}
		if !v.value(depth) {
			return false
		}
		v.space()
		if v.i >= len(v.b) {
			return false
		}
		switch v.b[v.i] {
		case ',':
			v.i++
			v.space()
		case close:
			v.i++
			return true
		default:
			return false
		}
	}
}

// key scans an object member's name, its colon and the space after.
func (v *jsonValidator) key() bool {
	if v.i >= len(v.b) || v.b[v.i] != '"' {
		return false
	}
	if ok := v.text && v.textStr() || !v.text && v.str(); !ok {
		return false
	}
	v.space()
	if v.i >= len(v.b) || v.b[v.i] != ':' {
		return false
	}
	v.i++
	v.space()
	return true
}

// str scans a string starting at its opening quote.
func (v *jsonValidator) str() bool {
	b, i := v.b, v.i+1
	for i < len(b) {
		c := b[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			i++ // the common case, kept in a register
			continue
		}
		switch {
		case c == '"':
			v.i = i + 1
			return true
		case c < 0x20:
			return false
		}
		// c == '\\'
		i++
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case 'b', 'f', 'n', 'r', 't', '\\', '/', '"':
			i++
		case 'u':
			if len(b)-i < 5 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
				return false
			}
			i += 5
		default:
			return false
		}
	}
	return false
}

// plain marks the bytes a string holds as they are: ASCII other than
// control bytes, '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// textStr is str for ValidText: multi-byte sequences must be UTF-8, and
// surrogate escapes must pair.
func (v *jsonValidator) textStr() bool {
	b, i := v.b, v.i+1
	for i < len(b) {
		c := b[i]
		if plain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			v.i = i + 1
			return true
		case c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			n := runeLen(b[i:])
			if n == 0 {
				return false
			}
			i += n
			continue
		}
		// c == '\\'
		i++
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case 'b', 'f', 'n', 'r', 't', '\\', '/', '"':
			i++
		case 'u':
			r, ok := hex4(b[i+1:])
			if !ok {
				return false
			}
			i += 5
			if !utf16.IsSurrogate(r) {
				continue
			}
			// A high surrogate, then \u and a low one.
			if r >= 0xdc00 || len(b)-i < 6 || b[i] != '\\' || b[i+1] != 'u' {
				return false
			}
			lo, ok := hex4(b[i+2:])
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return false
			}
			i += 6
		default:
			return false
		}
	}
	return false
}

// runeLen returns the length of the UTF-8 sequence of two to four bytes
// that starts b, or 0 when b does not start with one (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF). Two- and
// three-byte sequences, almost all non-ASCII text, are checked here
// without a call.
func runeLen(b []byte) int {
	c := b[0]
	switch {
	case c >= 0xc2 && c <= 0xdf:
		if len(b) >= 2 && b[1]&0xc0 == 0x80 {
			return 2
		}
		return 0
	case c >= 0xe0 && c <= 0xef:
		if len(b) < 3 || b[1]&0xc0 != 0x80 || b[2]&0xc0 != 0x80 ||
			c == 0xe0 && b[1] < 0xa0 || c == 0xed && b[1] > 0x9f {
			return 0
		}
		return 3
	}
	if r, n := utf8.DecodeRune(b); r != utf8.RuneError || n != 1 {
		return n
	}
	return 0
}

// hex4 decodes the four hex digits that start b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (v *jsonValidator) number() bool {
	if v.b[v.i] == '-' {
		v.i++
	}
	if v.i >= len(v.b) {
		return false
	}
	switch c := v.b[v.i]; {
	case c == '0':
		v.i++
	case '1' <= c && c <= '9':
		v.digits()
	default:
		return false
	}
	if v.i < len(v.b) && v.b[v.i] == '.' {
		v.i++
		if !v.digits() {
			return false
		}
	}
	if v.i < len(v.b) && (v.b[v.i] == 'e' || v.b[v.i] == 'E') {
		v.i++
		if v.i < len(v.b) && (v.b[v.i] == '+' || v.b[v.i] == '-') {
			v.i++
		}
		if !v.digits() {
			return false
		}
	}
	return true
}

// digits scans one or more decimal digits.
func (v *jsonValidator) digits() bool {
	b, i := v.b, v.i
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	start := v.i
	v.i = i
	return i > start
}
