package rpc

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/node/nodeapi"
)

// tenants is what the Namespaces handlers need from the node.
type tenants interface {
	CreateNamespace(ctx context.Context, c *fsmv1.CreateNamespace) (*fsmv1.Result, error)
	DeleteNamespace(ctx context.Context, d *fsmv1.DeleteNamespace) (*fsmv1.Result, error)
	SetRetentionPolicy(ctx context.Context, c *fsmv1.SetRetentionPolicy) (*fsmv1.Result, error)
	Read(ctx context.Context, ns string, opts nodeapi.ReadOptions, fn func(*fsm.View) error) (uint64, error)
	ReadBarrier(ctx context.Context, opts nodeapi.ReadOptions) error
	Namespace(name string) (fsm.NamespaceInfo, bool)
	Namespaces() []fsm.NamespaceInfo
}

type namespaces struct {
	b          tenants
	log        *slog.Logger
	audit      *auditor
	createWait time.Duration // after a create, before its reply (auth.go)
}

func (s *namespaces) Create(ctx context.Context, req *connect.Request[skaldv1.CreateRequest]) (*connect.Response[skaldv1.CreateResponse], error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	m := req.Msg
	if err := asInvalid(fsm.ValidateNewNamespaceName(m.Name)); err != nil {
		return nil, err
	}
	token, err := namespaceToken(m.Name, m.Token)
	if err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	window, err := dedupeWindow(m)
	if err != nil {
		return nil, err
	}
	res, err := s.b.CreateNamespace(ctx, &fsmv1.CreateNamespace{Name: m.Name, Description: m.Description, TokenHash: nstoken.Hash(token), DedupeWindowNanos: window})
	if err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	s.audit.record(ctx, "namespace.create", res.GetCreateNamespace().Name, res.GetCreateNamespace().Name)
	waitCreated(ctx, s.createWait)
	return connect.NewResponse(&skaldv1.CreateResponse{Name: res.GetCreateNamespace().Name, Token: token, CreatedAt: timestamp(res.GetCreateNamespace().CreatedUnixNano), Index: res.Index}), nil
}

func (s *namespaces) Delete(ctx context.Context, req *connect.Request[skaldv1.DeleteRequest]) (*connect.Response[skaldv1.DeleteResponse], error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	name := req.Msg.Name
	if name == nstoken.AdminNamespace {
		return nil, invalidField("name", "the %q namespace holds the admin token and cannot be deleted", nstoken.AdminNamespace)
	}
	if err := asInvalid(fsm.ValidateNamespaceName(name)); err != nil {
		return nil, err
	}
	res, err := s.b.DeleteNamespace(ctx, &fsmv1.DeleteNamespace{Name: name})
	if err != nil {
		return nil, toConnect(ctx, s.log, namedNamespace(name, err))
	}
	s.audit.record(ctx, "namespace.delete", res.GetDeleteNamespace().Name, res.GetDeleteNamespace().Name, "messages-deleted", res.GetDeleteNamespace().MessagesDeleted)
	return connect.NewResponse(&skaldv1.DeleteResponse{Name: res.GetDeleteNamespace().Name, DeletedAt: timestamp(res.GetDeleteNamespace().DeletedUnixNano), MessagesDeleted: res.GetDeleteNamespace().MessagesDeleted, Index: res.Index}), nil
}

// namespaceInfo is a namespace's entry and counters in Connect's shape.
func namespaceInfo(ns fsm.NamespaceInfo, st fsm.NamespaceStats) *skaldv1.NamespaceInfo {
	out := &skaldv1.NamespaceInfo{
		Name: ns.Name, Description: ns.Description, CreatedAt: timestamp(ns.CreatedAt),
		MessageCount: st.MessageCount, StreamCount: st.StreamCount, LastActivity: timestamp(st.LastActivity),
	}
	window, forever := ns.DedupeWindow()
	out.DedupeWindow, out.DedupeForever = durationpb.New(window), forever
	return out
}

func (s *namespaces) List(ctx context.Context, req *connect.Request[skaldv1.ListRequest]) (*connect.Response[skaldv1.ListResponse], error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if l := req.Msg.Limit; l < 0 || l > MaxNamespacesPage {
		return nil, invalidField("limit", "must be 0 (%d) or 1..%d, got %d", MaxNamespacesPage, MaxNamespacesPage, l)
	}
	entries, next, err := listNamespaces(ctx, s.b, req.Msg.Cursor, int(req.Msg.Limit))
	if err != nil {
		return nil, toConnect(ctx, s.log, err)
	}
	resp := &skaldv1.ListResponse{NextCursor: next}
	for _, n := range entries {
		resp.Namespaces = append(resp.Namespaces, namespaceInfo(n.info, n.stats))
	}
	return connect.NewResponse(resp), nil
}

// Get returns the namespace itself (the resource, not a wrapper).
func (s *namespaces) Get(ctx context.Context, req *connect.Request[skaldv1.GetRequest]) (*connect.Response[skaldv1.NamespaceInfo], error) {
	c := callerFrom(ctx)
	name := req.Msg.Name
	if name == "" {
		name = c.namespace // the namespace the call acts on: the token's own, or an admin's Skald-Namespace
	}
	if !c.admin && name != c.namespace {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New(c.onlyOwnNamespace("get")))
	}
	info, stats, err := namespaceStats(ctx, s.b, name, nodeapi.ReadOptions{Consistency: nodeapi.Linearizable})
	if err != nil {
		return nil, toConnect(ctx, s.log, namedNamespace(name, err))
	}
	return connect.NewResponse(namespaceInfo(info, stats)), nil
}

// dedupeWindow turns a Create request's idempotent-write options into
// CreateNamespace.dedupe_window_nanos.
func dedupeWindow(m *skaldv1.CreateRequest) (int64, error) {
	switch {
	case m.DedupeForever && m.DedupeWindow != nil:
		return 0, invalidField("dedupe_window", "must be unset with dedupe_forever")
	case m.DedupeForever:
		return fsm.DedupeForever, nil
	case m.DedupeWindow == nil:
		return 0, nil // the default
	}
	if err := m.DedupeWindow.CheckValid(); err != nil {
		return 0, invalidField("dedupe_window", "%v", err)
	}
	d := m.DedupeWindow.AsDuration()
	switch {
	case d == 0:
		return fsm.DedupeOff, nil
	case d < fsm.MinDedupeWindow:
		return 0, invalidField("dedupe_window", "must be 0 (off) or at least %s, got %s", fsm.MinDedupeWindow, d)
	}
	return int64(d), nil
}
