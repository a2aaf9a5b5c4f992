package rpc

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
)

// retentionNamespace resolves the namespace a retention call names
// (settingsNamespace).
func retentionNamespace(ctx context.Context, name string) (string, error) {
	return settingsNamespace(ctx, name, "manage the retention of", "takes no retention policy")
}

// settingsNamespace resolves the namespace a call on a namespace's
// settings names (retention policies, indexes): empty means the caller's
// own; a namespace token reaches only its own (what it does, for the
// error); the reserved admin namespace has none of them (none says so).
func settingsNamespace(ctx context.Context, name, what, none string) (string, error) {
	c := callerFrom(ctx)
	if name == "" {
		name = c.namespace
	}
	if !c.admin && name != c.namespace {
		return "", connect.NewError(connect.CodePermissionDenied, errors.New(c.onlyOwnNamespace(what)))
	}
	if name == nstoken.AdminNamespace {
		return "", invalidField("namespace", "the %q namespace holds the admin token and %s", nstoken.AdminNamespace, none)
	}
	if err := asInvalid(fsm.ValidateNamespaceName(name)); err != nil {
		return "", err
	}
	return name, nil
}

// retentionPolicyIn converts and validates a policy of the API.
func retentionPolicyIn(p *skaldv1.RetentionPolicy) (*fsmv1.RetentionPolicy, error) {
	if p == nil {
		return nil, invalidField("policy", "is required")
	}
	out := &fsmv1.RetentionPolicy{Scope: fsmv1.RetentionScope(p.Scope), Name: p.Name, MaxCount: p.MaxCount}
	if p.MaxAge != nil {
		if err := p.MaxAge.CheckValid(); err != nil {
			return nil, invalidField("policy.max_age", "%v", err)
		}
		out.MaxAgeNanos = int64(p.MaxAge.AsDuration())
	}
	if err := asInvalid(fsm.ValidateRetentionPolicy(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// retentionPolicyOut is a stored policy in the API's shape.
func retentionPolicyOut(p *fsmv1.RetentionPolicy) *skaldv1.RetentionPolicy {
	out := &skaldv1.RetentionPolicy{Scope: skaldv1.RetentionScope(p.Scope), Name: p.Name, MaxCount: p.MaxCount}
	if p.MaxAgeNanos > 0 {
		out.MaxAge = durationpb.New(time.Duration(p.MaxAgeNanos))
	}
	return out
}

func (s *namespaces) SetRetentionPolicy(ctx context.Context, req *connect.Request[skaldv1.SetRetentionPolicyRequest]) (*connect.Response[skaldv1.SetRetentionPolicyResponse], error) {
	name, err := retentionNamespace(ctx, req.Msg.Namespace)
	if err != nil {
		return nil, err
	}
	p, err := retentionPolicyIn(req.Msg.Policy)
	if err != nil {
		return nil, err
	}
	res, err := s.b.SetRetentionPolicy(ctx, &fsmv1.SetRetentionPolicy{Namespace: name, Policy: p})
	if err != nil {
		return nil, toConnect(ctx, s.log, namedNamespace(name, err))
	}
	return connect.NewResponse(&skaldv1.SetRetentionPolicyResponse{Replaced: res.GetRetentionPolicy().Replaced, Index: res.Index}), nil
}

func (s *namespaces) ListRetentionPolicies(ctx context.Context, req *connect.Request[skaldv1.ListRetentionPoliciesRequest]) (*connect.Response[skaldv1.ListRetentionPoliciesResponse], error) {
	name, err := retentionNamespace(ctx, req.Msg.Namespace)
	if err != nil {
		return nil, err
	}
	opts, err := readOptions(req.Msg.Read)
	if err != nil {
		return nil, err
	}
	var ps []*fsmv1.RetentionPolicy
	applied, err := s.b.Read(ctx, name, opts, func(v *fsm.View) (err error) {
		ps, err = v.RetentionPolicies()
		return err
	})
	if err != nil {
		return nil, toConnect(ctx, s.log, namedNamespace(name, err))
	}
	resp := &skaldv1.ListRetentionPoliciesResponse{AppliedIndex: applied}
	for _, p := range ps {
		resp.Policies = append(resp.Policies, retentionPolicyOut(p))
	}
	return connect.NewResponse(resp), nil
}
