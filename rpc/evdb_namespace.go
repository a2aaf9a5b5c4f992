package rpc

import (
	"context"
	"net/http"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
)

// EventoDB's namespace methods (ns.*), Skald's extensions of the
// protocol.

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
	if err := fsm.ValidateNewNamespaceName(name); err != nil {
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
	return map[string]any{"namespace": res.GetCreateNamespace().Name, "token": token, "createdAt": rfc3339(res.GetCreateNamespace().CreatedUnixNano)}, nil
}

func (e *evdb) nsDelete(ctx context.Context, args evArgs) (any, *evError) {
	if err := evRequireAdmin(ctx); err != nil {
		return nil, err
	}
	name, everr := args.nonEmpty(0, "id")
	if everr != nil {
		return nil, everr
	}
	if name == nstoken.AdminNamespace {
		return nil, evInvalid("the %q namespace holds the admin token and cannot be deleted", nstoken.AdminNamespace)
	}
	res, err := e.b.DeleteNamespace(ctx, &fsmv1.DeleteNamespace{Name: name})
	if err != nil {
		return nil, e.backendError(ctx, namedNamespace(name, err))
	}
	e.audit.record(ctx, "namespace.delete", res.GetDeleteNamespace().Name, res.GetDeleteNamespace().Name, "messages-deleted", res.GetDeleteNamespace().MessagesDeleted)
	return map[string]any{"namespace": res.GetDeleteNamespace().Name, "deletedAt": rfc3339(res.GetDeleteNamespace().DeletedUnixNano), "messagesDeleted": res.GetDeleteNamespace().MessagesDeleted}, nil
}

// nsList lists at most MaxNamespacesPage namespaces, in byte order of the
// name; the Skald extension options {"cursor", "limit"} page through
// more, as ns.streams.
func (e *evdb) nsList(ctx context.Context, args evArgs) (any, *evError) {
	if err := evRequireAdmin(ctx); err != nil {
		return nil, err
	}
	opts, everr := args.opts(0)
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
			"createdAt": rfc3339(n.info.CreatedAt), "messageCount": n.stats.MessageCount})
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
			message: c.onlyOwnNamespace("read"), details: map[string]any{"namespace": c.namespace}}
	}
	info, stats, err := namespaceStats(ctx, e.b, name, linearizable)
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
			out = append(out, map[string]any{"stream": s.Stream, "version": s.Version, "lastActivity": rfc3339Seconds(s.LastActivity)})
		}
		return err
	})
	return out, everr
}

// nsCategories lists at most fsm.MaxCategoriesPage categories; the Skald
// extension options {"cursor", "limit"} page through more, as ns.streams.
func (e *evdb) nsCategories(ctx context.Context, args evArgs) (any, *evError) {
	opts, everr := args.opts(0)
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
func listingOpts(opts evOpts, max int) (cursor string, limit int64, everr *evError) {
	if cursor, _, everr = opts.str("cursor"); everr != nil {
		return "", 0, everr
	}
	limit, given, everr := opts.num("limit")
	if everr != nil {
		return "", 0, everr
	}
	if given && (limit < 1 || limit > int64(max)) {
		return "", 0, evInvalid("limit must be 1..%d, got %d", max, limit)
	}
	return cursor, limit, nil
}
