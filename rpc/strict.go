package rpc

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Strict input. Writes and queries refuse fields this server does not
// know, in every encoding, rather than ignore them as proto3 does
// elsewhere: a condition sent by a newer client, or one whose field name
// is misspelled, must not turn a conditional append into an
// unconditional one. JSON requests are decoded strictly (jsonCodec),
// binary ones are checked here.
//
// Text is never repaired: a request whose strings are not UTF-8, or hold
// an unpaired surrogate escape, is refused with the place named, where
// encoding/json would have stored U+FFFD in their stead (evdb.BadText for
// /rpc, evdb.ParseImportLine for /import; protobuf refuses such strings
// itself, protoCodec names the field, and fsm.ValidateAppend checks data
// and metadata).

// strictJSON reports whether m's JSON is decoded with unknown fields
// refused.
func strictJSON(m proto.Message) bool {
	switch m.(type) {
	case *skaldv1.AppendRequest, *skaldv1.AppendStreamRequest, *skaldv1.AppendMultiRequest, *skaldv1.QueryRequest:
		return true
	}
	return false
}

// checkKnown fails with InvalidArgument naming the first field of m (at
// any depth) this server does not know.
func checkKnown(m proto.Message) error {
	if path, num, ok := unknownField(m.ProtoReflect(), ""); ok {
		field := path
		if field == "" {
			field = "request"
		}
		return invalidField(field, "holds field number %d, which this server does not know: refused rather than ignored", num)
	}
	return nil
}

// unknownField finds the first unknown field of m: the path of the
// message holding it and its number.
func unknownField(m protoreflect.Message, path string) (string, protowire.Number, bool) {
	if u := m.GetUnknown(); len(u) > 0 {
		num, _, _ := protowire.ConsumeTag(u)
		return path, num, true
	}
	var (
		found     bool
		foundPath string
		foundNum  protowire.Number
	)
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || fd.IsMap() {
			return true
		}
		if fd.IsList() {
			l := v.List()
			for i := range l.Len() {
				if foundPath, foundNum, found = unknownField(l.Get(i).Message(), fmt.Sprintf("%s[%d]", join(string(fd.Name())), i)); found {
					return false
				}
			}
			return true
		}
		foundPath, foundNum, found = unknownField(v.Message(), join(string(fd.Name())))
		return !found
	})
	return foundPath, foundNum, found
}

// protoCodec is connect-go's binary protobuf codec, except that a request
// refused for a string that is not UTF-8 names the field ("unmarshal
// message: messages[0].type: string is not valid UTF-8"); protobuf's own
// error names none.
type protoCodec struct{}

func (protoCodec) Name() string { return "proto" }

func (protoCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("rpc: proto codec: %T is not a protobuf message", m)
	}
	return proto.Marshal(pm)
}

func (protoCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("rpc: proto codec: %T is not a protobuf message", m)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (protoCodec) MarshalStable(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("rpc: proto codec: %T is not a protobuf message", m)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(pm)
}

func (protoCodec) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("rpc: proto codec: %T is not a protobuf message", m)
	}
	if err := proto.Unmarshal(b, pm); err != nil {
		if path, ok := badUTF8Field(pm.ProtoReflect().Descriptor(), b, ""); ok {
			return fmt.Errorf("%s: string is not valid UTF-8 (refused, never repaired)", path)
		}
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

func (protoCodec) IsBinary() bool { return true }

// badUTF8Field finds the first string field of the wire message b (of
// type md) that is not UTF-8, at any depth, and returns its path
// ("messages[0].type"). Called only for a message protobuf refused.
func badUTF8Field(md protoreflect.MessageDescriptor, b []byte, path string) (string, bool) {
	counts := map[protowire.Number]int{} // elements seen of each repeated field
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		if typ != protowire.BytesType || fd == nil || fd.IsMap() {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return "", false
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		name := string(fd.Name())
		if path != "" {
			name = path + "." + name
		}
		if fd.IsList() {
			name = fmt.Sprintf("%s[%d]", name, counts[num])
			counts[num]++
		}
		switch {
		case fd.Kind() == protoreflect.StringKind && !utf8.Valid(v):
			return name, true
		case fd.Message() != nil:
			if p, ok := badUTF8Field(fd.Message(), v, name); ok {
				return p, true
			}
		}
	}
	return "", false
}
