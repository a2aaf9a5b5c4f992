package rpc

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
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
var auditActions = []string{"credential.create", "credential.revoke", "namespace.create", "namespace.delete", "admin.other-namespace"}

func newAuditor(log *slog.Logger, reg prometheus.Registerer) *auditor {
	a := &auditor{log: log, events: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "skald", Subsystem: "audit", Name: "events_total",
		Help: "Audited actions: credential and namespace changes, and calls of an admin credential on another namespace, by action.",
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
