package rpc

import (
	"context"
	"encoding/json"
	"time"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/rpc/evdb"
)

// EventoDB's credential methods (token.*), Skald's extensions: the same
// operations as the Credentials service (credentials.go). Each takes an
// options object whose "namespace" names another namespace (an admin
// credential only); without it the caller's own.

// evCredential is a credential in EventoDB's shape.
func evCredential(c fsm.CredentialInfo, lastUsed int64) map[string]any {
	out := map[string]any{"name": c.Name, "role": c.Role.String(), "scope": c.Scope,
		"createdAt": evdb.RFC3339(c.CreatedAt), "initial": c.Initial}
	if out["scope"] == nil {
		out["scope"] = []string{}
	}
	if c.ExpiresAt != 0 {
		out["expiresAt"] = evdb.RFC3339(c.ExpiresAt)
	}
	if lastUsed != 0 {
		out["lastUsed"] = evdb.RFC3339(lastUsed)
	}
	return out
}

// tokenCreate: ["token.create", name, {role, scope, expiresAt, namespace}]
// answers {"name", "role", ..., "token"}; the token is shown only here.
func (e *eventodb) tokenCreate(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	name, opts, ns, everr := args.NamedInNamespace()
	if everr != nil {
		return nil, everr
	}
	roleName, ok, everr := opts.Str("role")
	if everr != nil {
		return nil, everr
	}
	if !ok {
		return nil, evdb.Invalid("option role is required: reader, writer, owner or admin")
	}
	role, err := fsm.ParseRole(roleName)
	if err != nil {
		return nil, evdb.Invalid("option role: %v", err)
	}
	var scope []string
	if raw, ok := opts["scope"]; ok {
		if evdb.IsNull(raw) || json.Unmarshal(raw, &scope) != nil {
			return nil, evdb.Invalid("option scope must be an array of strings")
		}
	}
	n := newCredential{namespace: ns, name: name, role: role, scope: scope}
	if exp, ok, everr := opts.Str("expiresAt"); everr != nil {
		return nil, everr
	} else if ok {
		t, err := time.Parse(time.RFC3339Nano, exp)
		if err != nil {
			return nil, evdb.Invalid("option expiresAt must be an RFC 3339 time: %v", err)
		}
		if n.expiresAt, err = expiryNanos("expiresAt", t); err != nil {
			return nil, e.namedError(ctx, err)
		}
	}
	info, token, _, err := e.creds.create(ctx, n)
	if err != nil {
		return nil, e.namedError(ctx, err)
	}
	out := evCredential(info, 0)
	out["token"] = token
	return out, nil
}

// tokenList: ["token.list", {namespace}] answers an array of credentials.
func (e *eventodb) tokenList(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	opts, everr := args.Opts(0)
	if everr != nil {
		return nil, everr
	}
	ns, _, everr := opts.Str("namespace")
	if everr != nil {
		return nil, everr
	}
	creds, used, err := e.creds.list(ctx, ns)
	if err != nil {
		return nil, e.namedError(ctx, err)
	}
	out := make([]map[string]any, len(creds))
	for i, c := range creds {
		out[i] = evCredential(c, used[i])
	}
	return out, nil
}

// tokenRevoke: ["token.revoke", name, {namespace}] answers {"name",
// "revoked": true}; no node admits the credential once it returns.
func (e *eventodb) tokenRevoke(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	name, _, ns, everr := args.NamedInNamespace()
	if everr != nil {
		return nil, everr
	}
	if _, err := e.creds.revoke(ctx, ns, name); err != nil {
		return nil, e.namedError(ctx, err)
	}
	return map[string]any{"name": name, "revoked": true}, nil
}

// namedError answers err of a call that may name its namespace: a
// missing namespace is 404 (namedNamespace made it so), not the 403 of a
// deleted token namespace.
func (e *eventodb) namedError(ctx context.Context, err error) *evdb.Error {
	r, known := lookupError(err)
	if !known {
		e.log.Error("eventodb api: backend error", "err", err)
	}
	return r.evdbError(err)
}
