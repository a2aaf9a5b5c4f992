package command

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// WriteJSON writes v, a client value (client.Namespace, a slice of them, a
// struct holding them), as one line of JSON in the form the API's JSON
// (protojson) gives the same facts, so -o json prints the client's types
// without turning them back into API messages:
//
//   - a field is named by its json tag, else by its Go name in
//     lowerCamel case with initialisms as words (NodeID: nodeId,
//     APIAddress: apiAddress), in declaration order; embedded structs
//     lend their fields; every field is written, empty or not;
//   - a time.Time is an RFC 3339 string in UTC with 0, 3, 6 or 9
//     fractional digits, the zero time null (the server sent none);
//   - a time.Duration is seconds with an "s" ("120s", "0.500s");
//   - integers are JSON numbers (every count, position and index the CLI
//     prints is far below 2^53); a nil slice is [], a nil pointer null,
//     json.RawMessage its JSON (null when empty), other bytes base64.
func WriteJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	if err := writeValue(&b, reflect.ValueOf(v)); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
	rawType      = reflect.TypeFor[json.RawMessage]()
)

func writeValue(b *bytes.Buffer, v reflect.Value) error {
	if !v.IsValid() {
		b.WriteString("null")
		return nil
	}
	switch v.Type() {
	case timeType:
		t := v.Interface().(time.Time)
		if t.IsZero() {
			b.WriteString("null")
			return nil
		}
		writeJSONString(b, protoTime(t))
		return nil
	case durationType:
		writeJSONString(b, protoDuration(time.Duration(v.Int())))
		return nil
	case rawType:
		if v.Len() == 0 {
			b.WriteString("null")
			return nil
		}
		b.Write(v.Bytes())
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		return writeValue(b, v.Elem())
	case reflect.Struct:
		b.WriteByte('{')
		first := true
		if err := writeFields(b, v, &first); err != nil {
			return err
		}
		b.WriteByte('}')
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.Kind() == reflect.Slice {
				writeJSONString(b, base64.StdEncoding.EncodeToString(v.Bytes()))
				return nil
			}
		}
		b.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeValue(b, v.Index(i)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("json: map key %s: want string", v.Type().Key())
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k.String())
			b.WriteByte(':')
			if err := writeValue(b, v.MapIndex(k)); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case reflect.String:
		writeJSONString(b, v.String())
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		b.WriteString(strconv.FormatFloat(v.Float(), 'g', -1, v.Type().Bits()))
	default:
		return fmt.Errorf("json: cannot write a %s", v.Type())
	}
	return nil
}

// writeFields writes the exported fields of the struct v, those of its
// embedded structs in their place.
func writeFields(b *bytes.Buffer, v reflect.Value, first *bool) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			if err := writeFields(b, v.Field(i), first); err != nil {
				return err
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		name := lowerCamel(f.Name)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == "-" {
			continue
		} else if tag != "" {
			name = tag
		}
		if !*first {
			b.WriteByte(',')
		}
		*first = false
		writeJSONString(b, name)
		b.WriteByte(':')
		if err := writeValue(b, v.Field(i)); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	return nil
}

// lowerCamel is a Go field name as protojson names the same field:
// NodeID is nodeId, APIAddress apiAddress, IDs ids, MessageCount
// messageCount.
func lowerCamel(name string) string {
	r := []rune(name)
	var words []string
	start := 0
	for i := 1; i <= len(r); i++ {
		switch {
		case i == len(r):
		case unicode.IsUpper(r[i]) && !unicode.IsUpper(r[i-1]):
		case unicode.IsUpper(r[i]) && i+1 < len(r) && unicode.IsLower(r[i+1]) && string(r[i:i+2]) != "Ds":
			// the last capital of an initialism starts the next word
			// (APIAddress: API, Address), but IDs is one word
		default:
			continue
		}
		words = append(words, string(r[start:i]))
		start = i
	}
	var out strings.Builder
	for i, w := range words {
		w = strings.ToLower(w)
		if i > 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		out.WriteString(w)
	}
	return out.String()
}

// protoTime is t as protojson writes a google.protobuf.Timestamp.
func protoTime(t time.Time) string {
	s := t.UTC().Format("2006-01-02T15:04:05.000000000")
	s = strings.TrimSuffix(s, "000")
	s = strings.TrimSuffix(s, "000")
	s = strings.TrimSuffix(s, ".000")
	return s + "Z"
}

// protoDuration is d as protojson writes a google.protobuf.Duration.
func protoDuration(d time.Duration) string {
	secs, nanos := int64(d/time.Second), int64(d%time.Second)
	sign := ""
	if secs < 0 || nanos < 0 {
		sign, secs, nanos = "-", -secs, -nanos
	}
	s := fmt.Sprintf("%s%d.%09d", sign, secs, nanos)
	s = strings.TrimSuffix(s, "000")
	s = strings.TrimSuffix(s, "000")
	s = strings.TrimSuffix(s, ".000")
	return s + "s"
}
