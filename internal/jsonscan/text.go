package jsonscan

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// TextError says where a valid JSON document fails ValidText.
type TextError struct {
	// Offset is the byte offset of the bad byte or escape in the document.
	Offset int
	// Path is the JSON path of the string holding it: "" for the document
	// itself, then ".name" per object member and "[i]" per array element
	// (".note", "[2].data.tags[0]"). When the bad text is in a member's
	// name, Path is that member's path and InName is true.
	Path   string
	InName bool
	// Reason is what is wrong: "byte 0xff is not UTF-8" or "\ud800 is an
	// unpaired UTF-16 surrogate escape".
	Reason string
}

func (e *TextError) Error() string {
	where := "in the string"
	if e.InName {
		where = "in the member name"
	}
	if e.Path != "" {
		where += " at " + e.Path
	}
	return fmt.Sprintf("not valid UTF-8 text: %s %s (byte offset %d)", e.Reason, where, e.Offset)
}

// BadText returns where the JSON document b, valid per Valid, fails
// ValidText, or nil when it does not. It walks b a second time and
// builds the path as it goes: call it only once b was refused.
func BadText(b []byte) *TextError {
	w := textWalker{b: b}
	w.space()
	w.value("")
	return w.err
}

// textWalker finds the first bad string of a valid document.
type textWalker struct {
	b   []byte
	i   int
	err *TextError
}

func (w *textWalker) space() {
	for w.i < len(w.b) && (w.b[w.i] == ' ' || w.b[w.i] == '\t' || w.b[w.i] == '\r' || w.b[w.i] == '\n') {
		w.i++
	}
}

// value walks the value at w.i; it stops (w.err set) at the first bad
// string. The document is valid JSON, so the grammar needs no checks.
func (w *textWalker) value(path string) {
	switch w.b[w.i] {
	case '{':
		w.i++
		for w.err == nil {
			w.space()
			if w.b[w.i] == '}' {
				w.i++
				return
			}
			if w.b[w.i] == ',' {
				w.i++
				w.space()
			}
			name := path + member(w.b[w.i:strEnd(w.b, w.i)])
			if w.str(name, true); w.err != nil {
				return
			}
			w.space()
			w.i++ // ':'
			w.space()
			w.value(name)
		}
	case '[':
		w.i++
		for n := 0; w.err == nil; n++ {
			w.space()
			if w.b[w.i] == ']' {
				w.i++
				return
			}
			if w.b[w.i] == ',' {
				w.i++
				w.space()
			}
			w.value(path + "[" + strconv.Itoa(n) + "]")
		}
	case '"':
		w.str(path, false)
	default: // number or literal: up to the next separator
		for w.i < len(w.b) && !strings.ContainsRune(",]} \t\r\n", rune(w.b[w.i])) {
			w.i++
		}
	}
}

// str walks the string at w.i, setting w.err at its first bad text.
func (w *textWalker) str(path string, name bool) {
	bad := func(off int, format string, args ...any) {
		w.err = &TextError{Offset: off, Path: path, InName: name, Reason: fmt.Sprintf(format, args...)}
	}
	b := w.b
	i := w.i + 1
	for {
		c := b[i]
		switch {
		case c == '"':
			w.i = i + 1
			return
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				bad(i, "byte 0x%02x is not UTF-8", c)
				return
			}
			i += n
		case c != '\\':
			i++
		case b[i+1] != 'u':
			i += 2
		default:
			r, _ := hex4(b[i+2:])
			if !utf16.IsSurrogate(r) {
				i += 6
				continue
			}
			if r < 0xdc00 && len(b)-i >= 12 && b[i+6] == '\\' && b[i+7] == 'u' {
				if lo, ok := hex4(b[i+8:]); ok && lo >= 0xdc00 && lo <= 0xdfff {
					i += 12
					continue
				}
			}
			bad(i, "%s is an unpaired UTF-16 surrogate escape", b[i:i+6])
			return
		}
	}
}

// strEnd returns the offset just past the string starting at i.
func strEnd(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// member renders a member name (the JSON string raw) as a path step:
// ".name" when it is a plain identifier, else `["na me"]`.
func member(raw []byte) string {
	var name string
	if json.Unmarshal(raw, &name) != nil {
		name = string(raw)
	}
	plainName := name != ""
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			plainName = false
			break
		}
	}
	if plainName {
		return "." + name
	}
	return "[" + strconv.Quote(name) + "]"
}
