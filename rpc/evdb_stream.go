package rpc

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/jsonscan"
	"github.com/skalddb/skald/rpc/evdb"
)

// EventoDB's stream methods: stream.write, stream.get, stream.last,
// stream.version, and the message shapes they answer with.

func streamArg(args evdb.Args) (string, *evdb.Error) {
	s, err := args.NonEmpty(0, "streamName")
	if err != nil {
		return "", err
	}
	if verr := fsm.ValidateStreamName("streamName", s); verr != nil {
		return "", evdb.Refused("", verr)
	}
	return s, nil
}

func (e *eventodb) streamWrite(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	stream, everr := streamArg(args)
	if everr != nil {
		return nil, everr
	}
	if len(args) < 2 {
		return nil, evdb.Invalid("missing argument 2 (message)")
	}
	msg, ok := jsonscan.Members(args[1])
	if !ok && (evdb.IsNull(args[1]) || json.Unmarshal(args[1], &msg) != nil) {
		return nil, evdb.Invalid("argument 2 (message) must be an object")
	}
	typ, ok := jsonscan.String(msg["type"])
	if !ok {
		if raw, present := msg["type"]; !present || json.Unmarshal(raw, &typ) != nil {
			return nil, evdb.Invalid("message.type must be a non-empty string")
		}
	}
	if typ == "" {
		return nil, evdb.Invalid("message.type must be a non-empty string")
	}
	if err := fsm.ValidateTypeName("type", typ); err != nil {
		return nil, evdb.Refused("message.type: ", err)
	}
	data, ok := msg["data"]
	if !ok || !evdb.IsObject(data) {
		return nil, evdb.Invalid("message.data must be an object")
	}
	var metadata []byte
	if raw, ok := msg["metadata"]; ok && !evdb.IsNull(raw) {
		if !evdb.IsObject(raw) {
			return nil, evdb.Invalid("message.metadata must be an object")
		}
		metadata = raw
	}
	if len(data)+len(metadata) > maxMessageBytes {
		return nil, evdb.Invalid("message %s", tooLarge(len(data)+len(metadata)))
	}
	opts, everr := args.Opts(2)
	if everr != nil {
		return nil, everr
	}
	id, hasID, everr := opts.Str("id")
	if everr != nil {
		return nil, everr
	}
	if hasID && id != "" {
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, evdb.Invalid("option id must be a UUID")
		}
		id = u.String()
	}
	ev, everr := opts.ExpectedVersion()
	if everr != nil {
		return nil, everr
	}
	a := &fsmv1.Append{Namespace: callerFrom(ctx).namespace, Stream: stream, ExpectedVersion: ev,
		Messages: []*fsmv1.NewMessage{{Id: id, Type: typ, Data: evdb.CompactJSON(data), Metadata: evdb.CompactJSON(metadata), ClientId: id != ""}}}
	res, err := e.b.Append(ctx, a)
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	return map[string]int64{"position": res.GetAppend().FirstPosition, "globalPosition": res.GetAppend().FirstGlobalPosition}, nil
}

func rawOrNull(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// streamFormat is [id, type, position, globalPosition, data, metadata, time].
func streamFormat(m *fsm.Message) []any {
	return []any{m.ID, m.Type, m.Position, m.GlobalPosition, json.RawMessage(m.Data), rawOrNull(m.Metadata), rfc3339(m.Time)}
}

// categoryFormat is [id, streamName, type, position, globalPosition, data, metadata, time].
func categoryFormat(m *fsm.Message) []any {
	return []any{m.ID, m.Stream, m.Type, m.Position, m.GlobalPosition, json.RawMessage(m.Data), rawOrNull(m.Metadata), rfc3339(m.Time)}
}

func (e *eventodb) streamGet(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	stream, opts, everr := streamAndOpts(args)
	if everr != nil {
		return nil, everr
	}
	pos, _, everr := opts.Num("position")
	if everr != nil {
		return nil, everr
	}
	gp, _, everr := opts.Num("globalPosition")
	if everr != nil {
		return nil, everr
	}
	limit, everr := opts.BatchSize()
	if everr != nil {
		return nil, everr
	}
	read := func(v *fsm.View, from int64, limit int) ([]fsm.Message, error) {
		return v.ReadStream(fsm.StreamQuery{Stream: stream, Position: from, GlobalPosition: gp, Limit: limit})
	}
	return e.readPages(ctx, &evPages{from: max(pos, 0), read: read, format: streamFormat,
		next: func(m *fsm.Message) int64 { return m.Position + 1 }}, limit)
}

func (e *eventodb) streamLast(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	stream, opts, everr := streamAndOpts(args)
	if everr != nil {
		return nil, everr
	}
	typ, _, everr := opts.Str("type")
	if everr != nil {
		return nil, everr
	}
	var out any
	everr = e.read(ctx, func(v *fsm.View) error {
		m, ok, err := v.LastMessage(stream, typ)
		if ok {
			out = streamFormat(&m)
		}
		return err
	})
	return out, everr
}

func (e *eventodb) streamVersion(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	stream, everr := streamArg(args)
	if everr != nil {
		return nil, everr
	}
	var out any
	everr = e.read(ctx, func(v *fsm.View) error {
		ver, err := v.StreamVersion(stream)
		if ver >= 0 {
			out = ver
		}
		return err
	})
	return out, everr
}

// streamAndOpts reads the arguments most stream methods take: the stream
// name, then the options object (absent means none).
func streamAndOpts(args evdb.Args) (string, evdb.Opts, *evdb.Error) {
	stream, everr := streamArg(args)
	if everr != nil {
		return "", nil, everr
	}
	opts, everr := args.Opts(1)
	return stream, opts, everr
}
