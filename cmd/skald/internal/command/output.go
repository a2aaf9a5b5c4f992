package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/skalddb/skald/client"
)

// The JSON of the admin commands (-o json) is the client's result as
// WriteJSON prints it, which is the API's reply in protojson (lowerCamel
// names, every field, timestamps and durations as strings) with one
// change: 64-bit integers are JSON numbers, as the messages of read, query
// and tail print them, not protojson's strings. Every count, position and
// index the CLI prints is far below 2^53, so every JSON reader takes them
// exactly. Where the API's reply says more than the client's type (enum
// names such as SUFFRAGE_VOTER, ROLE_READER) or less (append's message
// ids), a command prints the API's message with PrintJSON instead.

// PrintJSON writes one protobuf message as a JSON object on one line.
func PrintJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: false, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	writeJSON(&out, numbersFor(m.ProtoReflect().Descriptor(), v))
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// orderedObject is a JSON object with its keys in the order read.
type orderedObject []struct {
	key string
	val any
}

// decodeOrdered reads one JSON value: objects as orderedObject, arrays as
// []any, numbers as json.Number.
func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		var obj orderedObject
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			obj = append(obj, struct {
				key string
				val any
			}{k.(string), v})
		}
		_, err := dec.Token() // }
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ]
		return arr, err
	}
	return tok, nil
}

// numbersFor turns the 64-bit integer fields of a message of type md,
// which protojson writes as strings, into numbers, down through nested
// messages, lists and maps.
func numbersFor(md protoreflect.MessageDescriptor, v any) any {
	obj, ok := v.(orderedObject)
	if !ok {
		return v
	}
	if md.FullName() == "google.protobuf.Int64Value" || md.FullName() == "google.protobuf.UInt64Value" {
		return asNumber(v) // a wrapper is its value
	}
	fields := md.Fields()
	for i := range obj {
		fd := fields.ByJSONName(obj[i].key)
		if fd == nil {
			continue
		}
		convert := func(x any) any { return fieldNumbers(fd, x) }
		switch {
		case fd.IsMap():
			if m, ok := obj[i].val.(orderedObject); ok {
				for j := range m {
					m[j].val = fieldNumbers(fd.MapValue(), m[j].val)
				}
			}
		case fd.IsList():
			if l, ok := obj[i].val.([]any); ok {
				for j := range l {
					l[j] = convert(l[j])
				}
			}
		default:
			obj[i].val = convert(obj[i].val)
		}
	}
	return obj
}

// fieldNumbers converts one value of the field fd.
func fieldNumbers(fd protoreflect.FieldDescriptor, v any) any {
	switch fd.Kind() {
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return asNumber(v)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return numbersFor(fd.Message(), v)
	}
	return v
}

// asNumber is a protojson integer string as a number; anything else as
// it is.
func asNumber(v any) any {
	if s, ok := v.(string); ok {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return json.Number(s)
		}
		if _, err := strconv.ParseUint(s, 10, 64); err == nil {
			return json.Number(s)
		}
	}
	return v
}

// writeJSON writes v compactly, objects in their order.
func writeJSON(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case orderedObject:
		b.WriteByte('{')
		for i, kv := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, kv.key)
			b.WriteByte(':')
			writeJSON(b, kv.val)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, e)
		}
		b.WriteByte(']')
	case string:
		writeJSONString(b, x)
	case json.Number:
		b.WriteString(x.String())
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case nil:
		b.WriteString("null")
	}
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode's newline
}

// TimestampOf is t as a protobuf timestamp; nil (JSON null) for the zero
// time, which the client gives for a time the server did not send.
func TimestampOf(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// JSONMessage is a message for scripts: data and metadata as JSON, not
// base64.
type JSONMessage struct {
	ID             string          `json:"id"`
	Stream         string          `json:"stream"`
	Type           string          `json:"type"`
	Position       int64           `json:"position"`
	GlobalPosition int64           `json:"globalPosition"`
	Data           json.RawMessage `json:"data"`
	Metadata       json.RawMessage `json:"metadata"`
	Time           string          `json:"time"`
	Tags           []string        `json:"tags,omitempty"`
}

func ToJSONMessage(m client.Message) JSONMessage {
	meta := json.RawMessage("null")
	if len(m.Metadata) > 0 {
		meta = m.Metadata
	}
	return JSONMessage{
		ID: m.ID, Stream: m.Stream, Type: m.Type, Position: m.Position, GlobalPosition: m.GlobalPosition,
		Data: m.Data, Metadata: meta, Time: m.Time.UTC().Format(time.RFC3339Nano), Tags: m.Tags,
	}
}

// PrintMessages writes messages as a table or as {"messages": [...]}.
func PrintMessages(w io.Writer, output string, msgs []client.Message) error {
	if output == "json" {
		out := struct {
			Messages []JSONMessage `json:"messages"`
		}{Messages: []JSONMessage{}}
		for _, m := range msgs {
			out.Messages = append(out.Messages, ToJSONMessage(m))
		}
		return json.NewEncoder(w).Encode(out)
	}
	// A TAGS column only when the page has tags: most namespaces use none.
	tagged := false
	for _, m := range msgs {
		tagged = tagged || len(m.Tags) > 0
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if tagged {
		fmt.Fprintln(tw, "STREAM\tPOS\tGPOS\tTYPE\tTIME\tTAGS\tDATA")
	} else {
		fmt.Fprintln(tw, "STREAM\tPOS\tGPOS\tTYPE\tTIME\tDATA")
	}
	for _, m := range msgs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t", m.Stream, m.Position, m.GlobalPosition, m.Type, m.Time.UTC().Format(time.RFC3339))
		if tagged {
			fmt.Fprintf(tw, "%s\t", strings.Join(m.Tags, ","))
		}
		fmt.Fprintf(tw, "%s\n", m.Data)
	}
	return tw.Flush()
}

func Table(w io.Writer, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
