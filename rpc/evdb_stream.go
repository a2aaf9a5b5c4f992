package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/jsonscan"
)

// EventoDB's stream methods: stream.write, stream.get, stream.last,
// stream.version, and the message shapes they answer with.

func streamArg(args evArgs) (string, *evError) {
	s, err := args.nonEmpty(0, "streamName")
	if err != nil {
		return "", err
	}
	if verr := fsm.ValidateStreamName("streamName", s); verr != nil {
		return "", evRefused("", verr)
	}
	return s, nil
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && jsonscan.Valid(t)
}

func (e *evdb) streamWrite(ctx context.Context, args evArgs) (any, *evError) {
	stream, everr := streamArg(args)
	if everr != nil {
		return nil, everr
	}
	if len(args) < 2 {
		return nil, evInvalid("missing argument 2 (message)")
	}
	msg, ok := jsonscan.Members(args[1])
	if !ok && (isNull(args[1]) || json.Unmarshal(args[1], &msg) != nil) {
		return nil, evInvalid("argument 2 (message) must be an object")
	}
	typ, ok := jsonscan.String(msg["type"])
	if !ok {
		if raw, present := msg["type"]; !present || json.Unmarshal(raw, &typ) != nil {
			return nil, evInvalid("message.type must be a non-empty string")
		}
	}
	var metadata []byte
	if raw, ok := msg["metadata"]; ok && !isNull(raw) {
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
		return nil, evInvalid("message %s", tooLarge(n))
	}
	opts, everr := args.opts(2)
	if everr != nil {
		return nil, everr
	}
	id, hasID, everr := opts.str("id")
	if everr != nil {
		return nil, everr
	}
	if hasID && id != "" {
		if m.Id, ok = canonicalID(id); !ok {
			return nil, evInvalid("option id must be a UUID")
		}
		m.ClientId = true
	}
	// Checked by fsm.ValidateExpectedVersion, as apply checks it.
	if a.ExpectedVersion, everr = opts.expectedVersion(); everr != nil {
		return nil, everr
	}
	m.Data, m.Metadata = compactJSON(m.Data), compactJSON(m.Metadata)
	res, err := e.b.Append(ctx, a)
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	return map[string]int64{"position": res.GetAppend().FirstPosition, "globalPosition": res.GetAppend().FirstGlobalPosition}, nil
}

// evWriteRefused words fsm's refusal of a stream.write in the names of
// its arguments ("message.data must be a JSON object").
func evWriteRefused(err error) *evError {
	var ve *fsm.ValidationError
	if !errors.As(err, &ve) {
		return evRefused("", err)
	}
	if f, ok := strings.CutPrefix(ve.Field, "messages[0]."); ok {
		return evInvalid("message.%s %s", f, ve.Reason)
	}
	return evRefused("", ve)
}

// compactJSON strips insignificant whitespace (what EventoDB's float64
// round trip also does) while keeping the number text exact. raw is valid
// JSON (both callers checked it is an object); without whitespace to strip
// it is returned as is.
func compactJSON(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	return jsonscan.Compact(raw)
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

func (e *evdb) streamGet(ctx context.Context, args evArgs) (any, *evError) {
	stream, opts, everr := streamAndOpts(args)
	if everr != nil {
		return nil, everr
	}
	pos, _, everr := opts.num("position")
	if everr != nil {
		return nil, everr
	}
	gp, _, everr := opts.num("globalPosition")
	if everr != nil {
		return nil, everr
	}
	limit, everr := opts.batchSize()
	if everr != nil {
		return nil, everr
	}
	read := func(v *fsm.View, from int64, limit int) ([]fsm.Message, error) {
		return v.ReadStream(fsm.StreamQuery{Stream: stream, Position: from, GlobalPosition: gp, Limit: limit})
	}
	return e.readPages(ctx, &evPages{from: max(pos, 0), read: read, format: streamFormat,
		next: func(m *fsm.Message) int64 { return m.Position + 1 }}, limit)
}

func (e *evdb) streamLast(ctx context.Context, args evArgs) (any, *evError) {
	stream, opts, everr := streamAndOpts(args)
	if everr != nil {
		return nil, everr
	}
	typ, _, everr := opts.str("type")
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

func (e *evdb) streamVersion(ctx context.Context, args evArgs) (any, *evError) {
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
func streamAndOpts(args evArgs) (string, evOpts, *evError) {
	stream, everr := streamArg(args)
	if everr != nil {
		return "", nil, everr
	}
	opts, everr := args.opts(1)
	return stream, opts, everr
}

// expectedVersion reads the expectedVersion option: nil when absent, -1
// (no stream yet) or more.
func (o evOpts) expectedVersion() (*int64, *evError) {
	ev, ok, everr := o.num("expectedVersion")
	switch {
	case everr != nil:
		return nil, everr
	case !ok:
		return nil, nil
	}
	if err := fsm.ValidateExpectedVersion("expectedVersion", &ev); err != nil {
		return nil, evInvalid("expectedVersion %s", err.(*fsm.ValidationError).Reason)
	}
	return &ev, nil
}
