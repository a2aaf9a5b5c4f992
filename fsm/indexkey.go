package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/jsonscan"
)

// Order keys of index fields (DESIGN.md, User-defined indexes). Each
// field's value is encoded so that comparing the encoded bytes compares
// the values, and so that every encoding is self-delimiting: an entry key
// is the concatenation of its fields' encodings, then the global
// position, and sorts by the first field, then the second, and so on.
//
//	string  the bytes, 0x00 escaped as 0x00 0xff, then 0x00 0x01; a
//	        prefix of a value encodes to a prefix of its encoding (less
//	        the terminator), which prefix queries use
//	int     int64 with the sign bit flipped, big-endian
//	time    unix nanoseconds, as int
//	float   IEEE 754 bits: sign bit flipped for positives, every bit for
//	        negatives; -0 is 0
//	bool    one byte, 0 or 1
//
// The encoding is an on-disk format (entries outlive binaries): never
// change it for a type; add types.

// appendOrderKey appends the encoding of a value of type t. v holds a
// string for strings, int64 for ints and times, float64 for floats, bool
// for bools.
func appendOrderKey(dst []byte, t fsmv1.IndexFieldType, v any) []byte {
	switch t {
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING:
		return append(appendEscaped(dst, v.(string)), 0, 1)
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_INT, fsmv1.IndexFieldType_INDEX_FIELD_TYPE_TIME:
		return binary.BigEndian.AppendUint64(dst, uint64(v.(int64))^(1<<63))
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT:
		f := v.(float64)
		if f == 0 {
			f = 0 // -0 orders with 0
		}
		b := math.Float64bits(f)
		if b&(1<<63) != 0 {
			b = ^b
		} else {
			b |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(dst, b)
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_BOOL:
		if v.(bool) {
			return append(dst, 1)
		}
		return append(dst, 0)
	}
	panic(fmt.Sprintf("fsm: order key of unknown field type %v", t))
}

// appendEscaped appends s with each 0x00 byte escaped, without the
// terminator: the encoding of a prefix of s.
func appendEscaped(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(append(dst, s[:i]...), 0, 0xff)
		s = s[i+1:]
	}
}

// MaxIndexValueBytes bounds a string field's value in an index entry. A
// message whose string field (from data, metadata or its stream name) is
// longer than this many bytes is not indexed: it is skipped and counted,
// as a message whose field is missing (IndexRoundResult.TooLarge). The
// rule depends on the message and the definition only, so every replica,
// every rebuild and every round decides the same. Values are never
// truncated: a truncated key would answer an equality query for a value
// the message does not hold. Queries refuse an equality value or a prefix
// longer than this: no entry can hold it.
const MaxIndexValueBytes = 1024

// errFieldMissing, errFieldType and errFieldTooLarge say why a message has
// no value for a field: it is skipped and counted, never an error of the
// loop.
var (
	errFieldMissing  = fmt.Errorf("field missing")
	errFieldType     = fmt.Errorf("field of another type")
	errFieldTooLarge = fmt.Errorf("field value longer than %d bytes", MaxIndexValueBytes)
)

// fieldValue extracts field f of m as appendOrderKey takes it. toks are
// f's pointer tokens (jsonscan.PointerTokens; computed here when nil). A string
// longer than MaxIndexValueBytes is errFieldTooLarge.
func fieldValue(f *fsmv1.IndexField, m *Message, toks []string) (any, error) {
	v, err := rawFieldValue(f, m, toks)
	if s, ok := v.(string); ok && err == nil && f.Type == fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING &&
		len(s) > MaxIndexValueBytes {
		return nil, errFieldTooLarge
	}
	return v, err
}

func rawFieldValue(f *fsmv1.IndexField, m *Message, toks []string) (any, error) {
	switch f.Source {
	case fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_TYPE:
		return m.Type, nil
	case fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_STREAM:
		return m.Stream, nil
	case fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_TIME:
		return m.Time, nil
	}
	doc := m.Data
	if f.Source == fsmv1.IndexFieldSource_INDEX_FIELD_SOURCE_METADATA {
		doc = m.Metadata
	}
	if toks == nil {
		toks = jsonscan.PointerTokens(f.Pointer)
	}
	v, ok := jsonscan.Lookup(doc, toks)
	if !ok {
		return nil, errFieldMissing
	}
	return jsonValue(f.Type, v)
}

// jsonValue converts a decoded JSON value (UseNumber) to a field's type.
func jsonValue(t fsmv1.IndexFieldType, v any) (any, error) {
	switch t {
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_INT:
		if n, ok := v.(json.Number); ok {
			if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
				return i, nil
			}
		}
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT:
		if n, ok := v.(json.Number); ok {
			if f, err := strconv.ParseFloat(string(n), 64); err == nil && !math.IsInf(f, 0) {
				return f, nil
			}
		}
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_TIME:
		if s, ok := v.(string); ok {
			if tm, err := time.Parse(time.RFC3339Nano, s); err == nil && ValidateTime("", tm) == nil {
				return tm.UnixNano(), nil
			}
		}
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_BOOL:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	}
	return nil, errFieldType
}

// ParseIndexValue parses a query's value text for a field of type t: a
// string as is, an int in decimal, a float, a time in RFC 3339, a bool as
// true or false. field names the value in the error.
func ParseIndexValue(field string, t fsmv1.IndexFieldType, text string) (any, error) {
	switch t {
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING:
		return text, nil
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_INT:
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, nil
		}
		return nil, invalid(field, "must be an integer (the field is an int), got %q", text)
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT:
		if f, err := strconv.ParseFloat(text, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, nil
		}
		return nil, invalid(field, "must be a finite number (the field is a float), got %q", text)
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_TIME:
		tm, err := time.Parse(time.RFC3339Nano, text)
		if err == nil {
			err = ValidateTime(field, tm)
		}
		if err != nil {
			return nil, invalid(field, "must be an RFC 3339 time between 1677 and 2262 (the field is a time), got %q", text)
		}
		return tm.UnixNano(), nil
	case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_BOOL:
		if b, err := strconv.ParseBool(text); err == nil && (text == "true" || text == "false") {
			return b, nil
		}
		return nil, invalid(field, "must be true or false (the field is a bool), got %q", text)
	}
	return nil, invalid(field, "the field has no known type")
}

// FormatIndexValue is the text of an order-keyed value, as
// ParseIndexValue reads it.
func FormatIndexValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}

// decodeOrderKeys splits an entry's field encodings back into values.
func decodeOrderKeys(fields []*fsmv1.IndexField, k []byte) ([]any, error) {
	out := make([]any, 0, len(fields))
	for _, f := range fields {
		switch f.Type {
		case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_STRING:
			var s []byte
			for {
				i := bytes.IndexByte(k, 0)
				if i < 0 || i+1 >= len(k) {
					return nil, errCorruptValue
				}
				s = append(s, k[:i]...)
				esc := k[i+1]
				k = k[i+2:]
				if esc == 1 {
					break
				}
				s = append(s, 0)
			}
			out = append(out, string(s))
		case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_INT, fsmv1.IndexFieldType_INDEX_FIELD_TYPE_TIME, fsmv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT:
			if len(k) < 8 {
				return nil, errCorruptValue
			}
			u := binary.BigEndian.Uint64(k)
			k = k[8:]
			if f.Type == fsmv1.IndexFieldType_INDEX_FIELD_TYPE_FLOAT {
				if u&(1<<63) != 0 {
					u &^= 1 << 63
				} else {
					u = ^u
				}
				out = append(out, math.Float64frombits(u))
			} else {
				out = append(out, int64(u^(1<<63)))
			}
		case fsmv1.IndexFieldType_INDEX_FIELD_TYPE_BOOL:
			if len(k) < 1 {
				return nil, errCorruptValue
			}
			out = append(out, k[0] == 1)
			k = k[1:]
		default:
			return nil, errCorruptValue
		}
	}
	if len(k) != 0 {
		return nil, errCorruptValue
	}
	return out, nil
}
