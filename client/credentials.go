package client

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// Role is what a credential may do (docs/access.md); each includes the
// ones before it.
type Role int32

// Roles.
const (
	RoleReader Role = Role(skaldv1.Role_ROLE_READER) // reads, queries, subscriptions, consuming groups
	RoleWriter Role = Role(skaldv1.Role_ROLE_WRITER) // reader plus appends
	RoleOwner  Role = Role(skaldv1.Role_ROLE_OWNER)  // writer plus settings, groups, deletes, credentials
	RoleAdmin  Role = Role(skaldv1.Role_ROLE_ADMIN)  // every namespace and the cluster (the admin namespace only)
)

var roleNames = map[Role]string{RoleReader: "reader", RoleWriter: "writer", RoleOwner: "owner", RoleAdmin: "admin"}

func (r Role) String() string {
	if s, ok := roleNames[r]; ok {
		return s
	}
	return "unspecified"
}

// Credential is one of a namespace's credentials. The token is never
// shown again after CreateCredential.
type Credential struct {
	Name  string
	Role  Role
	Scope []string // categories and stream-name prefixes ("invoice-*"); empty: the whole namespace
	// ExpiresAt is zero when it never expires.
	ExpiresAt time.Time
	CreatedAt time.Time
	// LastUsed is when the answering node last admitted it, to the minute;
	// zero when it has not since it started.
	LastUsed time.Time
	// Initial: the token the namespace was created with.
	Initial bool
}

// NewCredential describes a credential to create.
type NewCredential struct {
	// Namespace: empty for the token's own; another needs an admin token.
	Namespace string
	Name      string
	Role      Role
	Scope     []string
	ExpiresAt time.Time // zero: never
}

// CreatedCredential is the reply of CreateCredential.
type CreatedCredential struct {
	Credential
	// Token is shown only here: the server keeps its hash.
	Token string
	Index uint64
}

func credentialOf(c *skaldv1.Credential) Credential {
	return Credential{Name: c.Name, Role: Role(c.Role), Scope: c.Scope, ExpiresAt: asTime(c.ExpiresAt), CreatedAt: asTime(c.CreatedAt),
		LastUsed: asTime(c.LastUsed), Initial: c.Initial}
}

// CreateCredential creates a credential (an unscoped owner token of the
// namespace, or an admin token). ErrAlreadyExists when its name is taken.
func (c *Client) CreateCredential(ctx context.Context, n NewCredential) (CreatedCredential, error) {
	req := &skaldv1.CredentialsCreateRequest{Namespace: n.Namespace, Name: n.Name, Role: skaldv1.Role(n.Role), Scope: n.Scope}
	if !n.ExpiresAt.IsZero() {
		req.ExpiresAt = timestamppb.New(n.ExpiresAt)
	}
	resp, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.CredentialsCreateResponse], error) {
		return m.creds.Create(ctx, connect.NewRequest(req))
	})
	if err != nil {
		return CreatedCredential{}, err
	}
	return CreatedCredential{Credential: credentialOf(resp.Credential), Token: resp.Token, Index: resp.Index}, nil
}

// Credentials lists a namespace's credentials (empty: the token's own),
// by name.
func (c *Client) Credentials(ctx context.Context, namespace string) ([]Credential, error) {
	var out []Credential
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.creds.List(ctx, connect.NewRequest(&skaldv1.CredentialsListRequest{Namespace: namespace}))
		if err != nil {
			return err
		}
		out = out[:0]
		for _, cr := range r.Msg.Credentials {
			out = append(out, credentialOf(cr))
		}
		return nil
	})
	return out, err
}

// RevokeCredential revokes a namespace's credential (empty namespace: the
// token's own); once it returns no node admits it. ErrNotFound when the
// namespace holds no credential of that name.
func (c *Client) RevokeCredential(ctx context.Context, namespace, name string) error {
	_, err := writeReply(ctx, c, nil, func(ctx context.Context, m *member) (*connect.Response[skaldv1.CredentialsRevokeResponse], error) {
		return m.creds.Revoke(ctx, connect.NewRequest(&skaldv1.CredentialsRevokeRequest{Namespace: namespace, Name: name}))
	})
	return err
}
