package jsonscan

import "encoding/json"

// Elements returns the elements of the JSON array b (whitespace around it
// allowed), each without the whitespace around it, as sub-slices of b.
// ok is false when b is not exactly one valid array of text (ValidText):
// the EventoDB API then falls back to encoding/json for its error
// message, after BadText.
func Elements(b []byte) (elems []json.RawMessage, ok bool) {
	v := jsonValidator{b: b, text: true}
	v.space()
	if v.i >= len(b) || b[v.i] != '[' {
		return nil, false
	}
	v.i++
	v.space()
	if v.i < len(b) && b[v.i] == ']' {
		v.i++
		return []json.RawMessage{}, v.end()
	}
	elems = make([]json.RawMessage, 0, 4)
	for {
		start := v.i
		if !v.value(1) {
			return nil, false
		}
		elems = append(elems, b[start:v.i:v.i])
		more, ok := v.sep(']')
		if !ok {
			return nil, false
		}
		if !more {
			return elems, v.end()
		}
	}
}

// Members returns the members of the JSON object b (whitespace around it
// allowed) as sub-slices of b; a repeated name keeps its last value, as
// encoding/json does. ok is false when b is not exactly one valid object,
// and also when a member's name holds an escape or a non-ASCII byte
// (encoding/json unescapes names and repairs bad UTF-8 in them; the
// caller falls back to it).
func Members(b []byte) (members map[string]json.RawMessage, ok bool) {
	v := jsonValidator{b: b}
	v.space()
	if v.i >= len(b) || b[v.i] != '{' {
		return nil, false
	}
	v.i++
	v.space()
	members = make(map[string]json.RawMessage, 4)
	if v.i < len(b) && b[v.i] == '}' {
		v.i++
		return members, v.end()
	}
	for {
		start := v.i
		if v.i >= len(b) || b[v.i] != '"' || !v.str() {
			return nil, false
		}
		name := b[start+1 : v.i-1]
		for _, c := range name {
			if c == '\\' || c >= 0x80 {
				return nil, false
			}
		}
		v.space()
		if v.i >= len(b) || b[v.i] != ':' {
			return nil, false
		}
		v.i++
		v.space()
		vstart := v.i
		if !v.value(1) {
			return nil, false
		}
		members[string(name)] = b[vstart:v.i:v.i]
		more, ok := v.sep('}')
		if !ok {
			return nil, false
		}
		if !more {
			return members, v.end()
		}
	}
}

// String returns the value of the JSON string b when it holds no escape
// and only ASCII; ok is false otherwise (encoding/json then decodes it).
func String(b []byte) (s string, ok bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	for _, c := range in {
		if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
			return "", false
		}
	}
	return string(in), true
}

// Compact returns the valid JSON value b without insignificant
// whitespace, as encoding/json.Compact writes it: b itself when it has
// none (the common case: no copy), else a compacted copy.
func Compact(b []byte) []byte {
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\r' || c == '\n'):
			return compactCopy(b)
		}
	}
	return b
}

func compactCopy(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString && c == '\\':
			out = append(out, c)
			i++
			if i < len(b) {
				out = append(out, b[i])
			}
			continue
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\r' || c == '\n'):
			continue
		}
		out = append(out, c)
	}
	return out
}

// sep scans the space after a container's element, then its ',' (more
// follows) or its close; ok is false for anything else.
func (v *jsonValidator) sep(close byte) (more, ok bool) {
	v.space()
	if v.i >= len(v.b) {
		return false, false
	}
	switch v.b[v.i] {
	case ',':
		v.i++
		v.space()
		return true, true
	case close:
		v.i++
		return false, true
	}
	return false, false
}

// end reports whether only whitespace follows.
func (v *jsonValidator) end() bool {
	v.space()
	return v.i == len(v.b)
}
