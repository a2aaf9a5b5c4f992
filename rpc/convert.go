package rpc

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
)

func message(m *fsm.Message) *skaldv1.Message {
	return &skaldv1.Message{
		Id: m.ID, Stream: m.Stream, Type: m.Type, Position: m.Position, GlobalPosition: m.GlobalPosition,
		Data: m.Data, Metadata: m.Metadata, Time: timestamp(m.Time), Tags: m.Tags,
	}
}

func messages(in []fsm.Message) []*skaldv1.Message {
	out := make([]*skaldv1.Message, len(in))
	for i := range in {
		out[i] = message(&in[i])
	}
	return out
}

// timestamp converts unix nanoseconds; 0 (never) is nil.
func timestamp(ns int64) *timestamppb.Timestamp {
	if ns == 0 {
		return nil
	}
	return timestamppb.New(time.Unix(0, ns).UTC())
}
