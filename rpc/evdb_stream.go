package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

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
	var metadata []byte
	if raw, ok := msg["metadata"]; ok && !evdb.IsNull(raw) {
		metadata = raw
	}
	// The message is checked first, then its size, then the options: a
	// call with several faults is refused for the first in that order.
	m := &fsmv1.NewMessage{Type: typ, Data: msg["data"], Metadata: metadata}
	a := &fsmv1.Append{Namespace: callerFrom(ctx).namespace, Stream: stream, Messages: []*fsmv1.NewMessage{m}}
	if err := fsm.ValidateAppend(a); err != nil {
		return nil, evWriteRefused(err)
	}
	if n := len(m.Data) + len(m.Metadata); n > maxMessageBytes {
		return nil, evdb.Invalid("message %s", tooLarge(n))
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
		if m.Id, ok = canonicalID(id); !ok {
			return nil, evdb.Invalid("option id must be a UUID")
		}
		m.ClientId = true
	}
	// Checked by fsm.ValidateExpectedVersion, as apply checks it.
	if a.ExpectedVersion, everr = opts.ExpectedVersion(); everr != nil {
		return nil, everr
	}
	m.Data, m.Metadata = evdb.CompactJSON(m.Data), evdb.CompactJSON(m.Metadata)
	res, err := e.b.Append(ctx, a)
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	return map[string]int64{"position": res.GetAppend().FirstPosition, "globalPosition": res.GetAppend().FirstGlobalPosition}, nil
}

// evWriteRefused words fsm's refusal of a stream.write in the names of
// its arguments ("message.data must be a JSON object").
func evWriteRefused(err error) *evdb.Error {
	var ve *fsm.ValidationError
	if !errors.As(err, &ve) {
		return evdb.Refused("", err)
	}
	if f, ok := strings.CutPrefix(ve.Field, "messages[0]."); ok {
		return evdb.Invalid("message.%s %s", f, ve.Reason)
	}
	return evdb.Refused("", ve)
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
