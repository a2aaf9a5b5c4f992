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

// EventoDB's stream methods: stream.write, stream.get, stream.last and
// stream.version; the shapes they answer with are evdb.StreamMessage's.

func (e *eventodb) streamWrite(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	stream, everr := evdb.StreamArg(args)
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

func (e *eventodb) streamGet(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	stream, opts, everr := evdb.StreamAndOpts(args)
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
	return e.readPages(ctx, &evPages{from: max(pos, 0), read: read, format: evdb.StreamMessage,
		next: func(m *fsm.Message) int64 { return m.Position + 1 }}, limit)
}

func (e *eventodb) streamLast(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	stream, opts, everr := evdb.StreamAndOpts(args)
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
			out = evdb.StreamMessage(&m)
		}
		return err
	})
	return out, everr
}

func (e *eventodb) streamVersion(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	stream, everr := evdb.StreamArg(args)
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
