package rpc

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// The scope of calls that name an index or a group (touchesSource): what
// they read is whatever the index or the group's source can hold, so a
// scoped credential may make them only when every message it can hold is
// in the scope. Only a category or a stream bounds that: an index whose
// definition names a category the scope grants, a group whose source is
// such a category or a stream the scope grants. Types and tags (an index
// without a category, a DCB query) select across every category and are
// never within a scope. The handlers check on the view they read, so
// the definition checked is the one answered from.

// indexInScope fails PermissionDenied unless every message index name
// (info: its definition and any rebuild, which may replace the
// definition while the call reads) can hold is in c's scope.
func indexInScope(c caller, method, name string, info fsm.IndexInfo) error {
	if len(c.scope) == 0 {
		return nil
	}
	defs := []*fsmv1.IndexDefinition{info.Definition}
	if info.Rebuilding != nil {
		defs = append(defs, info.Rebuilding.Definition)
	}
	for _, d := range defs {
		if err := categoryInScope(c, method, fmt.Sprintf("index %q", name), d.GetCategory()); err != nil {
			return err
		}
	}
	return nil
}

// groupInScope fails PermissionDenied unless every message group rec can
// deliver is in c's scope: its source is a stream or a category the
// scope grants.
func groupInScope(c caller, method string, rec *fsmv1.GroupRecord) error {
	if len(c.scope) == 0 {
		return nil
	}
	what := fmt.Sprintf("group %q", rec.GetName())
	src := rec.GetSource()
	if s := src.GetStream(); s != "" {
		if fsm.ScopeAllowsStream(c.scope, s) {
			return nil
		}
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"%s may not call %s on %s: its source is the stream %q, and the scope has no entry %q or prefix of it",
			c.describe(), method, what, s, fsm.Category(s)))
	}
	return categoryInScope(c, method, what, src.GetCategory())
}

// categoryInScope fails PermissionDenied unless category (empty: no
// category, so every one) is granted by c's scope; what names the index
// or group whose source it is.
func categoryInScope(c caller, method, what, category string) error {
	switch {
	case category == "":
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"%s may not call %s on %s: it selects messages of every category (by type, tag or all of them), "+
				"beyond the scope %s; it needs an unscoped credential",
			c.describe(), method, what, strings.Join(c.scope, ",")))
	case !fsm.ScopeAllowsCategory(c.scope, category):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"%s may not call %s on %s: it holds the category %q, and the scope has no entry %q or prefix of it",
			c.describe(), method, what, category, category))
	}
	return nil
}

// deliveryInScope fails PermissionDenied when a group delivers a message
// of stream outside c's scope. groupInScope admits a consumer; this
// holds the scope for the rest of the stream, should the group be
// deleted and created again under its name with another source.
func deliveryInScope(c caller, method, group, stream string) error {
	if fsm.ScopeAllowsStream(c.scope, stream) {
		return nil
	}
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
		"%s may not call %s on group %q: it delivered a message of the stream %q, outside the scope",
		c.describe(), method, group, stream))
}

// indexReadable fails PermissionDenied unless the caller of ctx may call
// procedure on index name as v holds it (indexInScope).
func indexReadable(ctx context.Context, v *fsm.View, procedure, name string) error {
	c := callerFrom(ctx)
	if len(c.scope) == 0 {
		return nil
	}
	info, err := v.Index(name)
	if err != nil {
		return err
	}
	return indexInScope(c, strings.TrimPrefix(procedure, "/"), name, info)
}

// groupReadable fails PermissionDenied unless the caller of ctx may call
// procedure on group name as v holds it (groupInScope).
func groupReadable(ctx context.Context, v *fsm.View, procedure, name string) error {
	c := callerFrom(ctx)
	if len(c.scope) == 0 {
		return nil
	}
	rec, err := v.Group(name)
	if err != nil {
		return err
	}
	return groupInScope(c, strings.TrimPrefix(procedure, "/"), rec)
}

// groupAdmits fails unless the caller of ctx may call procedure on group
// name of its namespace, read at once (linearizable, so a group just
// created is found on every node). An unscoped caller passes unread.
func groupAdmits(ctx context.Context, b groups, procedure, name string) error {
	if len(callerFrom(ctx).scope) == 0 {
		return nil
	}
	_, err := b.Read(ctx, callerFrom(ctx).namespace, nodeapi.ReadOptions{Consistency: nodeapi.Linearizable},
		func(v *fsm.View) error { return groupReadable(ctx, v, procedure, name) })
	return err
}
