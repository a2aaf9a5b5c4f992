package client

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// RetentionScope says what a retention policy covers.
type RetentionScope int32

// Scopes of retention policies.
const (
	// ScopeNamespace: every stream of the namespace (Name empty).
	ScopeNamespace = RetentionScope(skaldv1.RetentionScope_RETENTION_SCOPE_NAMESPACE)
	// ScopeCategory: every stream of a category (Name: the category, the
	// text before a stream name's first '-').
	ScopeCategory = RetentionScope(skaldv1.RetentionScope_RETENTION_SCOPE_CATEGORY)
	// ScopeStream: one stream (Name: the stream).
	ScopeStream = RetentionScope(skaldv1.RetentionScope_RETENTION_SCOPE_STREAM)
)

func (s RetentionScope) String() string {
	switch s {
	case ScopeNamespace:
		return "namespace"
	case ScopeCategory:
		return "category"
	case ScopeStream:
		return "stream"
	}
	return "unspecified"
}

// RetentionPolicy bounds what the streams of its scope keep. Limits
// combine: a message goes when any policy covering its stream removes it.
// The leader applies them every retention interval (skald server
// --retention-interval), so a stream may briefly hold more.
type RetentionPolicy struct {
	Scope RetentionScope
	Name  string
	// MaxAge: messages older than this go (0: no age limit).
	MaxAge time.Duration
	// MaxCount: each stream keeps only positions above its version -
	// MaxCount (0: no count limit).
	MaxCount int64
}

// SetRetentionPolicy sets the policy of p's scope in namespace (empty: the
// token's own), replacing the one it had; a policy without limits removes
// it. replaced says whether the scope had one. Setting a policy is
// idempotent, so a try whose outcome is unknown is retried.
//
// Errors: ErrInvalidArgument: a negative limit, a malformed name, or the
// reserved "default" namespace. ErrNotFound: no such namespace.
// ErrPermissionDenied: a namespace token naming another namespace.
func (c *Client) SetRetentionPolicy(ctx context.Context, namespace string, p RetentionPolicy) (replaced bool, err error) {
	wp := &skaldv1.RetentionPolicy{Scope: skaldv1.RetentionScope(p.Scope), Name: p.Name, MaxCount: p.MaxCount}
	if p.MaxAge != 0 {
		wp.MaxAge = durationpb.New(p.MaxAge)
	}
	req := &skaldv1.SetRetentionPolicyRequest{Namespace: namespace, Policy: wp}
	resp, err := writeReply(ctx, c, removalRetry, func(ctx context.Context, m *member) (*connect.Response[skaldv1.SetRetentionPolicyResponse], error) {
		return m.namespaces.SetRetentionPolicy(ctx, connect.NewRequest(req))
	})
	if err != nil {
		return false, err
	}
	return resp.Replaced, nil
}

// RetentionPolicies lists namespace's policies (empty: the token's own):
// the namespace's first, then categories', then streams', each by name.
// The read is session-consistent by default, so it sees this client's own
// SetRetentionPolicy.
func (c *Client) RetentionPolicies(ctx context.Context, namespace string, opts ...ReadOption) ([]RetentionPolicy, error) {
	s := c.settings(opts)
	var out []RetentionPolicy
	err := c.read(ctx, func(ctx context.Context, m *member) error {
		r, err := m.namespaces.ListRetentionPolicies(ctx, connect.NewRequest(&skaldv1.ListRetentionPoliciesRequest{Namespace: namespace, Read: s.wire(c.session.Load())}))
		if err != nil {
			return err
		}
		c.observe(r.Msg.AppliedIndex)
		out = out[:0]
		for _, p := range r.Msg.Policies {
			out = append(out, RetentionPolicy{Scope: RetentionScope(p.Scope), Name: p.Name, MaxAge: p.MaxAge.AsDuration(), MaxCount: p.MaxCount})
		}
		return nil
	})
	return out, err
}
