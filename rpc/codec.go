package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// jsonCodec is connect-go's JSON codec, except that replies carry
// default-valued scalars: proto3 JSON leaves zero values out, so the first
// message of a stream (position 0) or of a reply's first position would
// read as if it had no position at all. Fields with explicit presence
// (optional, oneof, messages) are still left out when unset. Requests
// decode as before, unknown fields ignored, except in writes and queries
// (strict.go).
type jsonCodec struct{ name string }

// jsonCodecs replace both names connect-go registers for JSON, and its
// binary codec (protoCodec, strict.go).
func jsonCodecs() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(jsonCodec{"json"}),
		connect.WithCodec(jsonCodec{"json; charset=utf-8"}),
		connect.WithCodec(protoCodec{}),
	}
}

func (c jsonCodec) Name() string { return c.name }

func (jsonCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("rpc: json codec: %T is not a protobuf message", m)
	}
	return protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(pm)
}

func (jsonCodec) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("rpc: json codec: %T is not a protobuf message", m)
	}
	if len(b) == 0 {
		return errors.New("zero-length payload is not a valid JSON object")
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: !strictJSON(pm)}).Unmarshal(b, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

// MarshalStable is Marshal with whitespace compacted (connect-go uses it
// for cacheable GET requests).
func (c jsonCodec) MarshalStable(m any) ([]byte, error) {
	b, err := c.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// IsBinary is false: JSON is text.
func (jsonCodec) IsBinary() bool { return false }
