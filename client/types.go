package client

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// NewMessage is a message to append. Data must be a JSON object; Metadata
// a JSON object or empty (null). An empty ID is filled with a new UUID by
// the client before the first try, so every attempt carries the same id.
type NewMessage struct {
	ID       string
	Type     string
	Data     json.RawMessage
	Metadata json.RawMessage
	// Tags (at most 32, each 1..256 bytes, no repeats) are what Query and
	// append conditions select on, e.g. "course:c1". A message without
	// tags is still matched by a query item of types alone.
	Tags []string
}

// Message is a stored message.
type Message struct {
	ID             string
	Stream         string
	Type           string
	Position       int64 // in its stream, from 0
	GlobalPosition int64 // in the namespace, from 1
	Data           json.RawMessage
	Metadata       json.RawMessage // nil when null
	Time           time.Time       // the leader's clock when appended
	Tags           []string
}

// QueryItem matches a message whose type is any of Types (any type when
// empty) and which carries every one of Tags. It names at least one type
// or tag.
type QueryItem struct {
	Types, Tags []string
}

// Query matches the messages any of its items (1..16) matches.
type Query []QueryItem

func (q Query) wire() *skaldv1.Query {
	out := &skaldv1.Query{Items: make([]*skaldv1.QueryItem, len(q))}
	for i, it := range q {
		out.Items[i] = &skaldv1.QueryItem{Types: it.Types, Tags: it.Tags}
	}
	return out
}

// AppendResult is where an append landed.
type AppendResult struct {
	FirstPosition, LastPosition             int64
	FirstGlobalPosition, LastGlobalPosition int64
	// Index is the write's Raft index; the client's session reads wait
	// for it on any node.
	Index uint64
	// IDs are the messages' ids, in order (the given ones and those the
	// client generated).
	IDs []string
	// Duplicate: the messages were already written (a retry of an append
	// whose first try's answer was lost, or the caller's own repeat with
	// the same ids); the positions are the original ones.
	Duplicate bool
}

// StreamAppend is one stream's part of an AppendMulti.
type StreamAppend struct {
	Stream   string
	Messages []NewMessage
	// ExpectedVersion, when set, must be the stream's version (-1: no
	// message yet).
	ExpectedVersion *int64
}

// StreamResult is where one stream's messages of an AppendMulti landed.
type StreamResult struct {
	Stream                                  string
	FirstPosition, LastPosition             int64
	FirstGlobalPosition, LastGlobalPosition int64
	// IDs are the messages' ids, in order.
	IDs []string
}

// AppendMultiResult is the reply of AppendMulti: one StreamResult per
// stream in the call's order.
type AppendMultiResult struct {
	Streams                                 []StreamResult
	FirstGlobalPosition, LastGlobalPosition int64
	Index                                   uint64
	// Duplicate: the call's messages were already written (a retry).
	Duplicate bool
}

// Consistency is the guarantee a read asks for.
type Consistency int

const (
	// Session reads see at least every write this Client made and
	// everything an earlier read of this Client saw, on whichever member
	// serves them. The default.
	Session Consistency = iota
	// Linearizable reads see every write acknowledged to anyone before
	// the read began.
	Linearizable
	// Local reads see whatever the serving member has applied.
	Local
)

func (c Consistency) String() string {
	switch c {
	case Session:
		return "session"
	case Linearizable:
		return "linearizable"
	case Local:
		return "local"
	}
	return "unknown"
}

// ReadOption changes one read's consistency.
type ReadOption func(*readSettings)

type readSettings struct {
	consistency  Consistency
	maxStaleness time.Duration
}

// WithLinearizable makes a read linearizable.
func WithLinearizable() ReadOption {
	return func(s *readSettings) { s.consistency = Linearizable }
}

// WithLocal makes a read local: whatever the serving member has applied,
// refused (and asked of another member) when that member last heard from
// the leader longer than maxStaleness ago; 0 means no bound.
func WithLocal(maxStaleness time.Duration) ReadOption {
	return func(s *readSettings) { s.consistency, s.maxStaleness = Local, maxStaleness }
}

// WithSession makes a read session-consistent (the default, unless
// Config.Consistency says otherwise).
func WithSession() ReadOption {
	return func(s *readSettings) { s.consistency = Session }
}

// readOptions is the wire form of a read's settings; minIndex is the
// session's index.
func (s readSettings) wire(minIndex uint64) *skaldv1.ReadOptions {
	switch s.consistency {
	case Linearizable:
		return &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LINEARIZABLE}
	case Local:
		o := &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_LOCAL}
		if s.maxStaleness > 0 {
			o.MaxStaleness = durationpb.New(s.maxStaleness)
		}
		return o
	}
	return &skaldv1.ReadOptions{Consistency: skaldv1.Consistency_CONSISTENCY_SESSION, MinIndex: minIndex}
}

// ConsumerGroup selects the streams one member of a group owns (Message DB
// rules). The zero value selects every stream.
type ConsumerGroup struct {
	Member, Size int64
}

func (g ConsumerGroup) wire() *skaldv1.ConsumerGroup {
	if g.Size == 0 && g.Member == 0 {
		return nil
	}
	return &skaldv1.ConsumerGroup{Member: g.Member, Size: g.Size}
}

func fromWire(m *skaldv1.Message) Message {
	out := Message{
		ID: m.Id, Stream: m.Stream, Type: m.Type, Position: m.Position, GlobalPosition: m.GlobalPosition,
		Data: m.Data, Time: m.Time.AsTime(), Tags: m.Tags,
	}
	if len(m.Metadata) > 0 && string(m.Metadata) != "null" {
		out.Metadata = m.Metadata
	}
	return out
}

func fromWireAll(ms []*skaldv1.Message) []Message {
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = fromWire(m)
	}
	return out
}
