package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"connectrpc.com/connect"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/node/nodeapi"
)

// credentialStore is what the credential operations need from the node.
type credentialStore interface {
	CreateCredential(ctx context.Context, c *fsmv1.CreateCredential) (*fsmv1.Result, error)
	RevokeCredential(ctx context.Context, c *fsmv1.RevokeCredential) (*fsmv1.Result, error)
	Credentials(name string) ([]fsm.CredentialInfo, error)
	Namespace(name string) (fsm.NamespaceInfo, bool)
	ReadBarrier(ctx context.Context, opts nodeapi.ReadOptions) error
}

// credentialOps are the credential operations both APIs call
// (Credentials on Connect, token.* on EventoDB); errors go through
// errorTable.
type credentialOps struct {
	b     credentialStore
	used  *lastUsed
	audit *auditor
}

// credentialNamespace resolves the namespace a credential call names:
// empty means the caller's own; only an admin credential reaches another.
func credentialNamespace(c caller, name string) (string, error) {
	if name == "" || name == c.namespace {
		return c.namespace, nil
	}
	if !c.admin {
		return "", &permissionError{fmt.Sprintf("%s may manage the credentials of its own namespace only, not %q", c.describe(), name)}
	}
	if err := fsm.ValidateNamespaceName(name); err != nil {
		return "", err
	}
	return name, nil
}

// newCredential is a credential to create, as both APIs give it.
type newCredential struct {
	namespace string
	name      string
	role      fsm.Role
	scope     []string
	expiresAt int64 // unix ns; 0: never
}

// create adds a credential and returns it and its token. A caller may
// give no role above its own (an owner cannot make an admin).
func (o credentialOps) create(ctx context.Context, n newCredential) (fsm.CredentialInfo, string, uint64, error) {
	c := callerFrom(ctx)
	ns, err := credentialNamespace(c, n.namespace)
	if err != nil {
		return fsm.CredentialInfo{}, "", 0, err
	}
	if err := fsm.ValidateCredentialName("name", n.name); err != nil {
		return fsm.CredentialInfo{}, "", 0, err
	}
	switch {
	case n.role < fsm.RoleReader || n.role > fsm.RoleAdmin:
		return fsm.CredentialInfo{}, "", 0, &fsm.ValidationError{Field: "role", Reason: "must be reader, writer, owner or admin"}
	case n.role > c.role:
		return fsm.CredentialInfo{}, "", 0, &permissionError{fmt.Sprintf("%s may not create a credential of role %s", c.describe(), n.role)}
	case n.role == fsm.RoleAdmin && ns != nstoken.AdminNamespace:
		return fsm.CredentialInfo{}, "", 0, &fsm.ValidationError{Field: "role", Reason: fmt.Sprintf("admin credentials exist only in the %q namespace", nstoken.AdminNamespace)}
	case n.role == fsm.RoleAdmin && len(n.scope) > 0:
		return fsm.CredentialInfo{}, "", 0, &fsm.ValidationError{Field: "scope", Reason: "an admin credential has no scope"}
	case n.expiresAt != 0 && n.expiresAt <= time.Now().UnixNano():
		return fsm.CredentialInfo{}, "", 0, &fsm.ValidationError{Field: "expires_at", Reason: "must be in the future"}
	}
	if err := fsm.ValidateScope("scope", n.scope); err != nil {
		return fsm.CredentialInfo{}, "", 0, err
	}
	token, id, err := nstoken.NewCredential(ns)
	if err != nil {
		return fsm.CredentialInfo{}, "", 0, err
	}
	// No creation time: the leader stamps it (fsm/kinds.go) and the
	// result carries it back, so the record and the reply hold the same
	// time on every node, whichever one the call came to.
	cmd := &fsmv1.CreateCredential{Namespace: ns, Id: id, Name: n.name, Role: uint32(n.role), Scope: n.scope,
		ExpiresUnixNano: n.expiresAt, TokenHash: nstoken.Hash(token)}
	res, err := o.b.CreateCredential(ctx, cmd)
	if err != nil {
		return fsm.CredentialInfo{}, "", 0, namedNamespace(ns, err)
	}
	o.audit.record(ctx, "credential.create", ns, n.name, "role", n.role.String(), "scope", strings.Join(n.scope, ","))
	created := res.GetCredential().GetCreatedUnixNano()
	if created == 0 {
		// Rolling upgrade: a leader older than CredentialResult's
		// created_unix_nano stamped the record with its own clock and does
		// not say which time; this node's clock is the closest answer
		// (off from the record by the two clocks' skew and the call's
		// latency). Drop the fallback once no such leader can run.
		created = time.Now().UnixNano()
	}
	info := fsm.CredentialInfo{ID: id, Name: n.name, Role: n.role, Scope: n.scope, ExpiresAt: n.expiresAt, CreatedAt: created}
	return info, token, res.Index, nil
}

// list returns a namespace's credentials, linearizably, with when each
// last admitted a call on this node (to the minute; 0: not since it
// started).
func (o credentialOps) list(ctx context.Context, namespace string) ([]fsm.CredentialInfo, []int64, error) {
	ns, err := credentialNamespace(callerFrom(ctx), namespace)
	if err != nil {
		return nil, nil, err
	}
	if err := o.b.ReadBarrier(ctx, nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}); err != nil {
		return nil, nil, err
	}
	info, ok := o.b.Namespace(ns)
	if !ok {
		return nil, nil, &namespaceNotFoundError{name: ns}
	}
	creds, err := o.b.Credentials(ns)
	if err != nil {
		return nil, nil, namedNamespace(ns, err)
	}
	used := make([]int64, len(creds))
	for i, cr := range creds {
		used[i] = o.used.get(info.ID, cr.ID)
	}
	return creds, used, nil
}

// revoke removes a credential; once it returns no node admits it.
func (o credentialOps) revoke(ctx context.Context, namespace, name string) (uint64, error) {
	ns, err := credentialNamespace(callerFrom(ctx), namespace)
	if err != nil {
		return 0, err
	}
	if err := fsm.ValidateCredentialName("name", name); err != nil {
		return 0, err
	}
	res, err := o.b.RevokeCredential(ctx, &fsmv1.RevokeCredential{Namespace: ns, Name: name})
	if err != nil {
		return 0, namedNamespace(ns, err)
	}
	o.audit.record(ctx, "credential.revoke", ns, name)
	return res.Index, nil
}

// credentials serves skald.v1.Credentials.
type credentials struct {
	ops credentialOps
	log *slog.Logger
}

func roleIn(r skaldv1.Role) fsm.Role { return fsm.Role(r) }

// expiryNanos is a credential's expiry as the store holds it. A time past
// the last one int64 nanoseconds hold (2262) is refused with a hint, not
// wrapped into the past: "never" is no expiry at all.
func expiryNanos(field string, t time.Time) (int64, error) {
	if err := fsm.ValidateTime(field, t); err != nil {
		var v *fsm.ValidationError
		if errors.As(err, &v) {
			v.Reason += "; leave the expiry out for a credential that never expires"
		}
		return 0, err
	}
	return t.UnixNano(), nil
}

func credentialOut(c fsm.CredentialInfo, lastUsed int64) *skaldv1.Credential {
	return &skaldv1.Credential{Name: c.Name, Role: skaldv1.Role(c.Role), Scope: c.Scope, ExpiresAt: timestamp(c.ExpiresAt),
		CreatedAt: timestamp(c.CreatedAt), LastUsed: timestamp(lastUsed), Initial: c.Initial}
}

func (s *credentials) Create(ctx context.Context, req *connect.Request[skaldv1.CredentialsCreateRequest]) (*connect.Response[skaldv1.CredentialsCreateResponse], error) {
	m := req.Msg
	n := newCredential{namespace: m.Namespace, name: m.Name, role: roleIn(m.Role), scope: m.Scope}
	var err error
	if m.ExpiresAt != nil {
		if err := m.ExpiresAt.CheckValid(); err != nil {
			return nil, invalidField("expires_at", "%v", err)
		}
		if n.expiresAt, err = expiryNanos("expires_at", m.ExpiresAt.AsTime()); err != nil {
			return nil, toConnect(ctx, s.log, err)
		}
	}
	info, token, index, err := s.ops.create(ctx, n)
	if err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	return connect.NewResponse(&skaldv1.CredentialsCreateResponse{Credential: credentialOut(info, 0), Token: token, Index: index}), nil
}

func (s *credentials) List(ctx context.Context, req *connect.Request[skaldv1.CredentialsListRequest]) (*connect.Response[skaldv1.CredentialsListResponse], error) {
	creds, used, err := s.ops.list(ctx, req.Msg.Namespace)
	if err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	out := &skaldv1.CredentialsListResponse{}
	for i, c := range creds {
		out.Credentials = append(out.Credentials, credentialOut(c, used[i]))
	}
	return connect.NewResponse(out), nil
}

func (s *credentials) Revoke(ctx context.Context, req *connect.Request[skaldv1.CredentialsRevokeRequest]) (*connect.Response[skaldv1.CredentialsRevokeResponse], error) {
	index, err := s.ops.revoke(ctx, req.Msg.Namespace, req.Msg.Name)
	if err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	return connect.NewResponse(&skaldv1.CredentialsRevokeResponse{Index: index}), nil
}
