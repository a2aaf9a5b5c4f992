package jsonscan

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

// maxJSONDepth is encoding/json's maxNestingDepth.
const maxJSONDepth = 10000

type jsonValidator struct {
	b []byte
	i int
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
	if v.i >= len(v.b) || v.b[v.i] != '"' || !v.str() {
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
