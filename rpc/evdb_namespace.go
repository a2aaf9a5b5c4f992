package rpc

import (
	"context"
	"net/http"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/rpc/evdb"
)

// EventoDB's namespace methods (ns.*), Skald's extensions of the
// protocol.

func evRequireAdmin(ctx context.Context) *evdb.Error {
	if !callerFrom(ctx).admin {
		return &evdb.Error{Status: http.StatusForbidden, Code: "AUTH_UNAUTHORIZED",
			Message: "this method needs the admin token (the default namespace's)",
			Details: map[string]any{"namespace": callerFrom(ctx).namespace}}
	}
	return nil
}

func (e *eventodb) nsCreate(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	if err := evRequireAdmin(ctx); err != nil {
		return nil, err
	}
	name, everr := args.NonEmpty(0, "id")
	if everr != nil {
		return nil, everr
	}
	if err := fsm.ValidateNewNamespaceName(name); err != nil {
		return nil, evdb.Refused("", err)
	}
	opts, everr := args.Opts(1)
	if everr != nil {
		return nil, everr
	}
	desc, _, everr := opts.Str("description")
	if everr != nil {
		return nil, everr
	}
	token, _, everr := opts.Str("token")
	if everr != nil {
		return nil, everr
	}
	token, err := namespaceToken(name, token)
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	res, err := e.b.CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: name, Description: desc, TokenHash: nstoken.Hash(token)})
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	e.audit.record(ctx, "namespace.create", res.GetCreateNamespace().Name, res.GetCreateNamespace().Name)
	waitCreated(ctx, e.unknown.createWait())
	created := res.GetCreateNamespace()
	return map[string]any{"namespace": created.Name, "token": token, "createdAt": evdb.RFC3339(created.CreatedUnixNano)}, nil
}

func (e *eventodb) nsDelete(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	if err := evRequireAdmin(ctx); err != nil {
		return nil, err
	}
	name, everr := args.NonEmpty(0, "id")
	if everr != nil {
		return nil, everr
	}
	if name == nstoken.AdminNamespace {
		return nil, evdb.Invalid("the %q namespace holds the admin token and cannot be deleted", nstoken.AdminNamespace)
	}
	res, err := e.b.DeleteNamespace(ctx, &fsmv1.DeleteNamespace{Name: name})
	if err != nil {
		return nil, e.backendError(ctx, namedNamespace(name, err))
	}
	e.audit.record(ctx, "namespace.delete", res.GetDeleteNamespace().Name, res.GetDeleteNamespace().Name, "messages-deleted", res.GetDeleteNamespace().MessagesDeleted)
	deleted := res.GetDeleteNamespace()
	return map[string]any{"namespace": deleted.Name, "deletedAt": evdb.RFC3339(deleted.DeletedUnixNano),
		"messagesDeleted": deleted.MessagesDeleted}, nil
}

// nsList lists at most MaxNamespacesPage namespaces, in byte order of the
// name; the Skald extension options {"cursor", "limit"} page through
// more, as ns.streams.
func (e *eventodb) nsList(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	if err := evRequireAdmin(ctx); err != nil {
		return nil, err
	}
	opts, everr := args.Opts(0)
	if everr != nil {
		return nil, everr
	}
	cursor, limit, everr := listingOpts(opts, MaxNamespacesPage)
	if everr != nil {
		return nil, everr
	}
	entries, _, err := listNamespaces(ctx, e.b, cursor, int(limit))
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	out := []any{}
	for _, n := range entries {
		out = append(out, map[string]any{"namespace": n.info.Name, "description": n.info.Description,
			"createdAt": evdb.RFC3339(n.info.CreatedAt), "messageCount": n.stats.MessageCount})
	}
	return out, nil
}

func (e *eventodb) nsInfo(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	name, everr := args.NonEmpty(0, "id")
	if everr != nil {
		return nil, everr
	}
	c := callerFrom(ctx)
	if !c.admin && name != c.namespace {
		return nil, &evdb.Error{Status: http.StatusForbidden, Code: "AUTH_UNAUTHORIZED",
			Message: c.onlyOwnNamespace("read"), Details: map[string]any{"namespace": c.namespace}}
	}
	info, stats, err := namespaceStats(ctx, e.b, name, linearizable)
	if err != nil {
		return nil, e.backendError(ctx, namedNamespace(name, err))
	}
	var last any
	if stats.LastActivity != 0 {
		last = evdb.RFC3339(stats.LastActivity)
	}
	return map[string]any{"namespace": info.Name, "description": info.Description,
		"createdAt":    evdb.RFC3339(info.CreatedAt),
		"messageCount": stats.MessageCount, "streamCount": stats.StreamCount, "lastActivity": last}, nil
}

func (e *eventodb) nsStreams(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	opts, everr := args.Opts(0)
	if everr != nil {
		return nil, everr
	}
	prefix, _, everr := opts.Str("prefix")
	if everr != nil {
		return nil, everr
	}
	cursor, limit, everr := listingOpts(opts, fsm.MaxStreamsPage)
	if everr != nil {
		return nil, everr
	}
	if limit == 0 {
		limit = 100
	}
	out := []any{}
	everr = e.read(ctx, func(v *fsm.View) error {
		streams, _, err := v.ListStreams(fsm.StreamsQuery{Prefix: prefix, Cursor: cursor, Limit: int(limit)})
		for _, s := range streams {
			out = append(out, map[string]any{"stream": s.Stream, "version": s.Version,
				"lastActivity": evdb.RFC3339Seconds(s.LastActivity)})
		}
		return err
	})
	return out, everr
}

// nsCategories lists at most fsm.MaxCategoriesPage categories; the Skald
// extension options {"cursor", "limit"} page through more, as ns.streams.
func (e *eventodb) nsCategories(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	opts, everr := args.Opts(0)
	if everr != nil {
		return nil, everr
	}
	cursor, limit, everr := listingOpts(opts, fsm.MaxCategoriesPage)
	if everr != nil {
		return nil, everr
	}
	out := []any{}
	everr = e.read(ctx, func(v *fsm.View) error {
		cats, _, err := v.ListCategories(fsm.CategoriesQuery{Cursor: cursor, Limit: int(limit)})
		for _, c := range cats {
			out = append(out, map[string]any{"category": c.Category, "streamCount": c.StreamCount, "messageCount": c.MessageCount})
		}
		return err
	})
	return out, everr
}

// listingOpts reads a listing's options: cursor, and limit, 1..max when
// given (0 when not).
func listingOpts(opts evdb.Opts, max int) (cursor string, limit int64, everr *evdb.Error) {
	if cursor, _, everr = opts.Str("cursor"); everr != nil {
		return "", 0, everr
	}
	limit, given, everr := opts.Num("limit")
	if everr != nil {
		return "", 0, everr
	}
	if given && (limit < 1 || limit > int64(max)) {
		return "", 0, evdb.Invalid("limit must be 1..%d, got %d", max, limit)
	}
	return cursor, limit, nil
}
