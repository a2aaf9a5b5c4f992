package nodeapi

// The node's sentinel errors: callers match them with errors.Is (or
// errors.As for NotInFlightError) to tell a refusal from an unknown
// outcome; rpc maps each to a status code.

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNoLeader is returned when no leader was known within
	// node.Config.LeaderWait. Nothing was proposed: the caller may retry.
	ErrNoLeader = errors.New("node: no leader")

	// ErrUnknownOutcome is returned when a write was proposed (or
	// forwarded) but its result is unknown: leadership was lost after the
	// proposal, or the forwarded call failed after it was sent. The write
	// may or may not be applied; the caller must not assume either.
	ErrUnknownOutcome = errors.New("node: write outcome unknown")

	// ErrNotCaughtUp is returned when a read could not reach the required
	// applied index in time (SESSION min index, a follower's read index).
	ErrNotCaughtUp = errors.New("node: not caught up")

	// ErrStale is returned by a LOCAL read whose max staleness bound has
	// passed since the last contact with the leader.
	ErrStale = errors.New("node: too stale")

	// ErrUnknownServer is returned when a call names a server that is not
	// in the Raft configuration.
	ErrUnknownServer = errors.New("node: no such server in the configuration")

	// ErrStorageFull is returned (wrapped, naming the server and what to
	// free) when the leader refuses a write because a voter has less free
	// disk space than node.Config.MinFreeDisk. Nothing was proposed.
	ErrStorageFull = errors.New("node: storage full")

	// ErrShutdown is returned by calls on a closed node.
	ErrShutdown = errors.New("node: shut down")

	// ErrTooManyConsumers is returned when a consumer would exceed its
	// group's max_consumers. Nothing changed.
	ErrTooManyConsumers = errors.New("node: too many consumers in the group")

	// ErrUpgradeRequired is returned (wrapped, naming the server and what
	// it last reported) for a command some server of the configuration is
	// not known to apply (it reports an older version, or has none recorded
	// and does not answer): applied, it would make replicas diverge.
	// Nothing was proposed; it goes through once every server is upgraded,
	// or back and reporting.
	ErrUpgradeRequired = errors.New("node: a server of the cluster needs an upgrade")

	// ErrTransferNotDone is returned (wrapped, with Raft's reason) when a
	// leadership transfer did not complete: another one was running, or
	// the target did not take over within an election timeout. The leader
	// is unchanged; the caller may try again.
	ErrTransferNotDone = errors.New("node: leadership did not move")

	// ErrSettingsLimit is matched by a *SettingsLimitError.
	ErrSettingsLimit = errors.New("node: the namespace holds as many as the cluster allows")
)

// SettingsLimitError is returned when the leader refuses to add a
// subscription group or a credential to a namespace that holds Limit of
// them (What: "subscription groups" or "credentials"; the leader's
// --max-groups-per-namespace or --max-credentials-per-namespace). Nothing
// was proposed. It matches ErrSettingsLimit.
type SettingsLimitError struct {
	Namespace string
	What      string
	Limit     int64
}

func (e *SettingsLimitError) Error() string { return "node: " + e.Describe() }

// Describe is the error's text without the package prefix.
func (e *SettingsLimitError) Describe() string {
	flag := "--max-groups-per-namespace"
	if e.What == "credentials" {
		flag = "--max-credentials-per-namespace"
	}
	return fmt.Sprintf("namespace %q holds %d %s, the most the cluster allows (%s); delete one or raise the limit", e.Namespace, e.Limit, e.What, flag)
}

// Is makes errors.Is(err, ErrSettingsLimit) true.
func (e *SettingsLimitError) Is(target error) bool { return target == ErrSettingsLimit }

// NotInFlightError is returned by Settle when some ids are not delivered
// and unsettled in the group (unknown, already settled, or delivered by a
// former leader). Nothing was settled.
type NotInFlightError struct{ IDs []string }

func (e *NotInFlightError) Error() string {
	return fmt.Sprintf("node: not in flight in the group: %s", strings.Join(e.IDs, ", "))
}
