package rpc

import (
	"context"
	"log/slog"
	"strings"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/api/skald/v1/skaldv1connect"
)

// auditor writes the audit trail: one structured log line per credential
// or namespace change, and per call of an admin credential on another
// namespace (who: the credential and its namespace; what: the action and
// its target; when: the line's time; from where: the client's address),
// each counted in skald_audit_events_total by action. Actions are a fixed
// set, so the metric's labels are bounded.
type auditor struct {
	log    *slog.Logger
	events *prometheus.CounterVec
}

// auditActions are the actions recorded, exported from the start so an
// alert on a rate sees the first one.
var auditActions = []string{"credential.create", "credential.revoke", "namespace.create", "namespace.delete",
	"admin.other-namespace", "access.refused",
	"index.create", "index.rebuild", "index.pause", "index.resume", "index.delete",
	"group.create", "group.update", "group.delete", "group.replay-parked", "group.delete-parked",
	"retention.set"}

// changeActions are the Connect calls that change a namespace's
// configuration, by the action each succeeded call is recorded under
// (credential and namespace changes are recorded by their handlers).
var changeActions = map[string]string{
	skaldv1connect.IndexesCreateProcedure:                "index.create",
	skaldv1connect.IndexesRebuildProcedure:               "index.rebuild",
	skaldv1connect.IndexesPauseProcedure:                 "index.pause",
	skaldv1connect.IndexesResumeProcedure:                "index.resume",
	skaldv1connect.IndexesDeleteProcedure:                "index.delete",
	skaldv1connect.SubscriptionsCreateGroupProcedure:     "group.create",
	skaldv1connect.SubscriptionsUpdateGroupProcedure:     "group.update",
	skaldv1connect.SubscriptionsDeleteGroupProcedure:     "group.delete",
	skaldv1connect.SubscriptionsReplayParkedProcedure:    "group.replay-parked",
	skaldv1connect.SubscriptionsDeleteParkedProcedure:    "group.delete-parked",
	skaldv1connect.NamespacesSetRetentionPolicyProcedure: "retention.set",
}

func newAuditor(log *slog.Logger, reg prometheus.Registerer) *auditor {
	a := &auditor{log: log, events: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "skald", Subsystem: "audit", Name: "events_total",
		Help: "Audited actions: credential, namespace, index, group and retention changes, refused calls of a known credential, and calls of an admin credential on another namespace, by action.",
	}, []string{"action"})}
	for _, act := range auditActions {
		a.events.WithLabelValues(act)
	}
	if reg != nil {
		reg.MustRegister(a.events)
	}
	return a
}

// record logs and counts action on target in namespace by ctx's caller;
// attrs are further key-value pairs.
func (a *auditor) record(ctx context.Context, action, namespace, target string, attrs ...any) {
	if a == nil {
		return
	}
	c := callerFrom(ctx)
	args := append([]any{"action", action, "credential", c.credential, "credential-namespace", c.home, "namespace", namespace,
		"target", target, "remote", c.remote}, attrs...)
	a.log.InfoContext(ctx, "audit", args...)
	a.events.WithLabelValues(action).Inc()
}

// refused records a call that a known credential was not allowed to
// make (its role or its scope): who tried what. Calls with no valid
// token are only counted (skald_rpc_requests_total), so that a flood of
// bad tokens cannot flood the log.
func (a *auditor) refused(ctx context.Context, procedure string, err error) {
	if callerFrom(ctx).credential == "" {
		return
	}
	a.record(ctx, "access.refused", callerFrom(ctx).namespace, strings.TrimPrefix(procedure, "/"), "reason", err.Error())
}

// changed records a succeeded call of changeActions, naming what it
// changed (an index, a group, a retention policy's scope).
func (a *auditor) changed(ctx context.Context, procedure string, msg any) {
	action, ok := changeActions[procedure]
	if !ok {
		return
	}
	a.record(ctx, action, callerFrom(ctx).namespace, changeTarget(msg))
}

// changeTarget is the name of what a change call names.
func changeTarget(msg any) string {
	switch m := msg.(type) {
	case *skaldv1.IndexesCreateRequest:
		return m.GetDefinition().GetName()
	case *skaldv1.SetRetentionPolicyRequest:
		p := m.GetPolicy()
		return strings.TrimPrefix(strings.ToLower(p.GetScope().String()), "retention_scope_") + ":" + p.GetName()
	case interface{ GetGroup() string }:
		return m.GetGroup()
	case interface{ GetName() string }:
		return m.GetName()
	}
	return ""
}

// auditChanges is the Connect interceptor that records changeActions and
// the refusals of handlers' own access checks.
type auditChanges struct{ audit *auditor }

func (a auditChanges) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		switch {
		case err == nil:
			a.audit.changed(ctx, req.Spec().Procedure, req.Any())
		case connect.CodeOf(err) == connect.CodePermissionDenied: // a handler's own check (scopesource.go)
			a.audit.refused(ctx, req.Spec().Procedure, err)
		}
		return resp, err
	}
}

func (a auditChanges) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a auditChanges) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		err := next(ctx, conn)
		if connect.CodeOf(err) == connect.CodePermissionDenied {
			a.audit.refused(ctx, conn.Spec().Procedure, err)
		}
		return err
	}
}
