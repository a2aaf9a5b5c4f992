package rpc

import (
	"context"
	"net/http"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/rpc/evdb"
)

// EventoDB-shaped retention policies (Skald's extensions): scopes by name,
// max-age in milliseconds.
var (
	evScopes = map[string]fsmv1.RetentionScope{
		"namespace": fsmv1.RetentionScope_RETENTION_SCOPE_NAMESPACE,
		"category":  fsmv1.RetentionScope_RETENTION_SCOPE_CATEGORY,
		"stream":    fsmv1.RetentionScope_RETENTION_SCOPE_STREAM,
	}
	evScopeNames = map[fsmv1.RetentionScope]string{
		fsmv1.RetentionScope_RETENTION_SCOPE_NAMESPACE: "namespace",
		fsmv1.RetentionScope_RETENTION_SCOPE_CATEGORY:  "category",
		fsmv1.RetentionScope_RETENTION_SCOPE_STREAM:    "stream",
	}
)

// evRetentionArgs reads a retention call's one argument, its options,
// and resolves their namespace (evRetentionNamespace).
func evRetentionArgs(ctx context.Context, args evdb.Args) (evdb.Opts, string, *evdb.Error) {
	opts, everr := args.Opts(0)
	if everr != nil {
		return nil, "", everr
	}
	ns, everr := evRetentionNamespace(ctx, opts)
	if everr != nil {
		return nil, "", everr
	}
	return opts, ns, nil
}

// evRetentionNamespace resolves a retention call's "namespace" option as
// Namespaces.SetRetentionPolicy does: empty is the caller's own; a
// namespace token reaches only its own; "default" takes no policy.
func evRetentionNamespace(ctx context.Context, opts evdb.Opts) (string, *evdb.Error) {
	name, _, everr := opts.Str("namespace")
	if everr != nil {
		return "", everr
	}
	c := callerFrom(ctx)
	if name == "" {
		name = c.namespace
	}
	if !c.admin && name != c.namespace {
		return "", &evdb.Error{Status: http.StatusForbidden, Code: "AUTH_UNAUTHORIZED",
			Message: c.onlyOwnNamespace("manage the retention of"), Details: map[string]any{"namespace": c.namespace}}
	}
	if name == nstoken.AdminNamespace {
		return "", evdb.Invalid("the %q namespace holds the admin token and takes no retention policy",
			nstoken.AdminNamespace)
	}
	return name, nil
}

// nsSetRetention is ["ns.setRetention", {"scope": "namespace"|"category"|
// "stream", "name", "maxAgeMs", "maxCount", "namespace"}] →
// {"replaced": bool}: Connect's Namespaces.SetRetentionPolicy. No limit
// removes the scope's policy.
func (e *eventodb) nsSetRetention(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	opts, ns, everr := evRetentionArgs(ctx, args)
	if everr != nil {
		return nil, everr
	}
	scopeName, _, everr := opts.Str("scope")
	if everr != nil {
		return nil, everr
	}
	scope, ok := evScopes[scopeName]
	if !ok {
		return nil, evdb.Invalid("option scope must be namespace, category or stream, got %q", scopeName)
	}
	name, _, everr := opts.Str("name")
	if everr != nil {
		return nil, everr
	}
	ageMs, _, everr := opts.Num("maxAgeMs")
	if everr != nil {
		return nil, everr
	}
	count, _, everr := opts.Num("maxCount")
	if everr != nil {
		return nil, everr
	}
	if ageMs < 0 || ageMs > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return nil, evdb.Invalid("option maxAgeMs must be 0 (no limit) or a positive number of milliseconds, got %d", ageMs)
	}
	p := &fsmv1.RetentionPolicy{Scope: scope, Name: name, MaxAgeNanos: ageMs * int64(time.Millisecond), MaxCount: count}
	if err := fsm.ValidateRetentionPolicy(p); err != nil {
		return nil, e.backendError(ctx, err)
	}
	res, err := e.b.SetRetentionPolicy(ctx, &fsmv1.SetRetentionPolicy{Namespace: ns, Policy: p})
	if err != nil {
		return nil, e.backendError(ctx, namedNamespace(ns, err))
	}
	return map[string]any{"replaced": res.GetRetentionPolicy().Replaced}, nil
}

// nsRetention is ["ns.retention", {"namespace"}] → {"policies": [{"scope",
// "name", "maxAgeMs", "maxCount"}]}: Connect's
// Namespaces.ListRetentionPolicies (namespace first, then categories, then
// streams, each by name).
func (e *eventodb) nsRetention(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	_, ns, everr := evRetentionArgs(ctx, args)
	if everr != nil {
		return nil, everr
	}
	var ps []*fsmv1.RetentionPolicy
	if _, err := e.b.Read(ctx, ns, linearizable, func(v *fsm.View) (err error) {
		ps, err = v.RetentionPolicies()
		return err
	}); err != nil {
		return nil, e.backendError(ctx, namedNamespace(ns, err))
	}
	out := make([]map[string]any, 0, len(ps))
	for _, p := range ps {
		out = append(out, map[string]any{"scope": evScopeNames[p.Scope], "name": p.Name,
			"maxAgeMs": p.MaxAgeNanos / int64(time.Millisecond), "maxCount": p.MaxCount})
	}
	return map[string]any{"policies": out}, nil
}
