package rpc

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

// Writes and queries refuse fields this server does not know, in every
// encoding, rather than ignore them as proto3 does elsewhere: a condition
// sent by a newer client, or one whose field name is misspelled, must not
// turn a conditional append into an unconditional one. JSON requests are
// decoded strictly (jsonCodec), binary ones are checked here.

// strictJSON reports whether m's JSON is decoded with unknown fields
// refused.
func strictJSON(m proto.Message) bool {
	switch m.(type) {
	case *skaldv1.AppendRequest, *skaldv1.AppendMultiRequest, *skaldv1.QueryRequest:
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
