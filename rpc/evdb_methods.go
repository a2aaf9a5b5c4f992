package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node"
	fsmv1 "github.com/skalddb/skald/rpc/gen/skald/fsm/v1"
)

type evMethod func(e *evdb, ctx context.Context, args evArgs) (any, *evError)

// evMethods are the /rpc methods. Reads are linearizable, so an SDK that
// writes on one node and reads on another sees its write.
var evMethods = map[string]evMethod{
	"stream.write":   (*evdb).streamWrite,
	"stream.get":     (*evdb).streamGet,
	"stream.last":    (*evdb).streamLast,
	"stream.version": (*evdb).streamVersion,
	// Skald's extensions (EventoDB's SDKs never send them).
	"stream.delete":              (*evdb).streamDelete,
	"stream.truncate":            (*evdb).streamTruncate,
	"category.deleteByWatermark": (*evdb).categoryDeleteByWatermark,
	"category.get":               (*evdb).categoryGet,
	"ns.create":                  (*evdb).nsCreate,
	"ns.delete":                  (*evdb).nsDelete,
	"ns.list":                    (*evdb).nsList,
	"ns.info":                    (*evdb).nsInfo,
	"ns.streams":                 (*evdb).nsStreams,
	"ns.categories":              (*evdb).nsCategories,
	"sys.version":                func(*evdb, context.Context, evArgs) (any, *evError) { return evdbVersion, nil },
	"sys.health": func(*evdb, context.Context, evArgs) (any, *evError) {
		return map[string]any{"status": "ok", "backend": "pebble", "connections": 0}, nil
	},
}

var linearizable = node.ReadOptions{Consistency: node.Linearizable}

// backendError answers err from the node or the state machine through
// errorTable, in EventoDB's shape. Data calls act on the token's
// namespace, so a missing namespace means it was deleted: 403. An unknown
// error is 500 BACKEND_ERROR (logged, never sent).
func (e *evdb) backendError(ctx context.Context, err error) *evError {
	r, known := lookupError(ownNamespace(ctx, err))
	if !known {
		e.log.Error("eventodb api: backend error", "err", err)
	}
	return r.evdbError(err)
}

// evRefused is 400 for a name fsm refused, in fsm's words.
func evRefused(prefix string, err error) *evError {
	var ve *fsm.ValidationError
	if errors.As(err, &ve) {
		return evInvalid("%s%s", prefix, ve.Describe())
	}
	return evInvalid("%s%v", prefix, err)
}

// read runs fn on a linearizable view of the caller's namespace.
func (e *evdb) read(ctx context.Context, fn func(*fsm.View) error) *evError {
	if _, err := e.b.Read(ctx, callerFrom(ctx).namespace, linearizable, fn); err != nil {
		return e.backendError(ctx, err)
	}
	return nil
}

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
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

func (e *evdb) streamWrite(ctx context.Context, args evArgs) (any, *evError) {
	stream, everr := streamArg(args)
	if everr != nil {
		return nil, everr
	}
	if len(args) < 2 {
		return nil, evInvalid("missing argument 2 (message)")
	}
	var msg map[string]json.RawMessage
	if isNull(args[1]) || json.Unmarshal(args[1], &msg) != nil {
		return nil, evInvalid("argument 2 (message) must be an object")
	}
	var typ string
	if raw, ok := msg["type"]; !ok || json.Unmarshal(raw, &typ) != nil || typ == "" {
		return nil, evInvalid("message.type must be a non-empty string")
	}
	if err := fsm.ValidateTypeName("type", typ); err != nil {
		return nil, evRefused("message.type: ", err)
	}
	data, ok := msg["data"]
	if !ok || !isObject(data) {
		return nil, evInvalid("message.data must be an object")
	}
	var metadata []byte
	if raw, ok := msg["metadata"]; ok && !isNull(raw) {
		if !isObject(raw) {
			return nil, evInvalid("message.metadata must be an object")
		}
		metadata = raw
	}
	if len(data)+len(metadata) > maxMessageBytes {
		return nil, evInvalid("message %s", tooLarge(len(data)+len(metadata)))
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
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, evInvalid("option id must be a UUID")
		}
		id = u.String()
	}
	ev, hasEV, everr := opts.num("expectedVersion")
	if everr != nil {
		return nil, everr
	}
	a := &fsmv1.Append{Namespace: callerFrom(ctx).namespace, Stream: stream,
		Messages: []*fsmv1.NewMessage{{Id: id, Type: typ, Data: compactJSON(data), Metadata: compactJSON(metadata), ClientId: id != ""}}}
	if hasEV {
		if ev < -1 {
			return nil, evInvalid("expectedVersion must be -1 or more, got %d", ev)
		}
		a.ExpectedVersion = &ev
	}
	res, err := e.b.Append(ctx, a)
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	return map[string]int64{"position": res.FirstPosition, "globalPosition": res.FirstGlobalPosition}, nil
}

// compactJSON strips insignificant whitespace (what EventoDB's float64
// round trip also does) while keeping the number text exact.
func compactJSON(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
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
	stream, everr := streamArg(args)
	if everr != nil {
		return nil, everr
	}
	opts, everr := args.opts(1)
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
	out := []any{}
	everr = e.read(ctx, func(v *fsm.View) error {
		msgs, err := v.ReadStream(fsm.StreamQuery{Stream: stream, Position: max(pos, 0), GlobalPosition: gp, Limit: limit})
		for i := range msgs {
			out = append(out, streamFormat(&msgs[i]))
		}
		return err
	})
	return out, everr
}

func (e *evdb) streamLast(ctx context.Context, args evArgs) (any, *evError) {
	stream, everr := streamArg(args)
	if everr != nil {
		return nil, everr
	}
	opts, everr := args.opts(1)
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

func (e *evdb) categoryGet(ctx context.Context, args evArgs) (any, *evError) {
	category, everr := args.str(0, "categoryName")
	if everr != nil {
		return nil, everr
	}
	opts, everr := args.opts(1)
	if everr != nil {
		return nil, everr
	}
	pos, hasPos, everr := opts.num("position")
	if everr != nil {
		return nil, everr
	}
	if gp, hasGP, err := opts.num("globalPosition"); err != nil {
		return nil, err
	} else if hasGP && !hasPos {
		pos = gp // the documented alias
	}
	limit, everr := opts.batchSize()
	if everr != nil {
		return nil, everr
	}
	correlation, _, everr := opts.str("correlation")
	if everr != nil {
		return nil, everr
	}
	member, size, everr := evConsumerGroup(opts)
	if everr != nil {
		return nil, everr
	}
	out := []any{}
	if strings.Contains(category, "-") {
		return out, nil // a stream name, not a category: matches nothing
	}
	everr = e.read(ctx, func(v *fsm.View) error {
		msgs, err := v.ReadCategory(fsm.CategoryQuery{Category: category, GlobalPosition: max(pos, 1), Limit: limit,
			Correlation: correlation, Member: member, Size: size})
		for i := range msgs {
			out = append(out, categoryFormat(&msgs[i]))
		}
		return err
	})
	return out, everr
}

// evConsumerGroup reads {"member": int, "size": int}: both required, size
// above 0, 0 <= member < size.
func evConsumerGroup(opts evOpts) (member, size int64, err *evError) {
	raw, ok := opts["consumerGroup"]
	if !ok {
		return 0, 0, nil
	}
	var g map[string]json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &g) != nil {
		return 0, 0, evInvalid("consumerGroup must be an object {member, size}")
	}
	m, hasM, err := evOpts(g).num("member")
	if err != nil {
		return 0, 0, evInvalid("consumerGroup.member must be a number")
	}
	s, hasS, err := evOpts(g).num("size")
	if err != nil {
		return 0, 0, evInvalid("consumerGroup.size must be a number")
	}
	switch {
	case !hasM || !hasS:
		return 0, 0, evInvalid("consumerGroup needs both member and size")
	case s < 1:
		return 0, 0, evInvalid("consumerGroup.size must be at least 1, got %d", s)
	case m < 0 || m >= s:
		return 0, 0, evInvalid("consumerGroup.member must be 0..%d, got %d", s-1, m)
	}
	return m, s, nil
}

func evRequireAdmin(ctx context.Context) *evError {
	if !callerFrom(ctx).admin {
		return &evError{status: http.StatusForbidden, code: "AUTH_UNAUTHORIZED", message: "this method needs the admin token (the default namespace's)",
			details: map[string]any{"namespace": callerFrom(ctx).namespace}}
	}
	return nil
}

func (e *evdb) nsCreate(ctx context.Context, args evArgs) (any, *evError) {
	if err := evRequireAdmin(ctx); err != nil {
		return nil, err
	}
	name, everr := args.nonEmpty(0, "id")
	if everr != nil {
		return nil, everr
	}
	if err := fsm.ValidateNamespaceName(name); err != nil {
		return nil, evRefused("", err)
	}
	opts, everr := args.opts(1)
	if everr != nil {
		return nil, everr
	}
	desc, _, everr := opts.str("description")
	if everr != nil {
		return nil, everr
	}
	token, _, everr := opts.str("token")
	if everr != nil {
		return nil, everr
	}
	if token == "" {
		var err error
		if token, err = NewToken(name); err != nil {
			return nil, e.backendError(ctx, err)
		}
	} else if tn, err := ParseToken(token); err != nil {
		return nil, evInvalid("option token: %v", err)
	} else if tn != name {
		return nil, evInvalid("option token names namespace %q, not %q", tn, name)
	}
	res, err := e.b.CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: name, Description: desc, TokenHash: TokenHash(token)})
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	return map[string]any{"namespace": res.Name, "token": token, "createdAt": rfc3339(res.CreatedAt)}, nil
}

func (e *evdb) nsDelete(ctx context.Context, args evArgs) (any, *evError) {
	if err := evRequireAdmin(ctx); err != nil {
		return nil, err
	}
	name, everr := args.nonEmpty(0, "id")
	if everr != nil {
		return nil, everr
	}
	if name == AdminNamespace {
		return nil, evInvalid("the %q namespace holds the admin token and cannot be deleted", AdminNamespace)
	}
	res, err := e.b.DeleteNamespace(ctx, &fsmv1.DeleteNamespace{Name: name})
	if err != nil {
		return nil, e.backendError(ctx, namedNamespace(name, err))
	}
	return map[string]any{"namespace": res.Name, "deletedAt": rfc3339(res.DeletedAt), "messagesDeleted": res.MessagesDeleted}, nil
}

// nsStats reads a namespace's registry entry and counters.
func (e *evdb) nsStats(ctx context.Context, name string, opts node.ReadOptions) (fsm.NamespaceInfo, fsm.NamespaceStats, error) {
	var (
		info  fsm.NamespaceInfo
		stats fsm.NamespaceStats
	)
	_, err := e.b.Read(ctx, name, opts, func(v *fsm.View) (err error) {
		info = v.Namespace()
		stats, err = v.Stats()
		return err
	})
	return info, stats, err
}

func (e *evdb) nsList(ctx context.Context, args evArgs) (any, *evError) {
	if err := evRequireAdmin(ctx); err != nil {
		return nil, err
	}
	if err := e.b.ReadBarrier(ctx, linearizable); err != nil {
		return nil, e.backendError(ctx, err)
	}
	out := []any{}
	for _, ns := range e.b.Store().Namespaces() {
		info, stats, err := e.nsStats(ctx, ns.Name, node.ReadOptions{Consistency: node.Local})
		if errors.Is(err, fsm.ErrNamespaceNotFound) {
			continue
		}
		if err != nil {
			return nil, e.backendError(ctx, err)
		}
		out = append(out, map[string]any{"namespace": info.Name, "description": info.Description,
			"createdAt": rfc3339(info.CreatedAt), "messageCount": stats.MessageCount})
	}
	return out, nil
}

func (e *evdb) nsInfo(ctx context.Context, args evArgs) (any, *evError) {
	name, everr := args.nonEmpty(0, "id")
	if everr != nil {
		return nil, everr
	}
	c := callerFrom(ctx)
	if !c.admin && name != c.namespace {
		return nil, &evError{status: http.StatusForbidden, code: "AUTH_UNAUTHORIZED",
			message: fmt.Sprintf("a namespace token may only read its own namespace %q", c.namespace), details: map[string]any{"namespace": c.namespace}}
	}
	info, stats, err := e.nsStats(ctx, name, linearizable)
	if err != nil {
		return nil, e.backendError(ctx, namedNamespace(name, err))
	}
	var last any
	if stats.LastActivity != 0 {
		last = rfc3339(stats.LastActivity)
	}
	return map[string]any{"namespace": info.Name, "description": info.Description, "createdAt": rfc3339(info.CreatedAt),
		"messageCount": stats.MessageCount, "streamCount": stats.StreamCount, "lastActivity": last}, nil
}

func (e *evdb) nsStreams(ctx context.Context, args evArgs) (any, *evError) {
	opts, everr := args.opts(0)
	if everr != nil {
		return nil, everr
	}
	prefix, _, everr := opts.str("prefix")
	if everr != nil {
		return nil, everr
	}
	cursor, _, everr := opts.str("cursor")
	if everr != nil {
		return nil, everr
	}
	limit, hasLimit, everr := opts.num("limit")
	if everr != nil {
		return nil, everr
	}
	if !hasLimit {
		limit = 100
	} else if limit < 1 || limit > 1000 {
		return nil, evInvalid("limit must be 1..1000, got %d", limit)
	}
	out := []any{}
	everr = e.read(ctx, func(v *fsm.View) error {
		streams, _, err := v.ListStreams(fsm.StreamsQuery{Prefix: prefix, Cursor: cursor, Limit: int(limit)})
		for _, s := range streams {
			out = append(out, map[string]any{"stream": s.Stream, "version": s.Version, "lastActivity": rfc3339Seconds(s.LastActivity)})
		}
		return err
	})
	return out, everr
}

func (e *evdb) nsCategories(ctx context.Context, args evArgs) (any, *evError) {
	out := []any{}
	everr := e.read(ctx, func(v *fsm.View) error {
		cats, err := v.ListCategories()
		for _, c := range cats {
			out = append(out, map[string]any{"category": c.Category, "streamCount": c.StreamCount, "messageCount": c.MessageCount})
		}
		return err
	})
	return out, everr
}
