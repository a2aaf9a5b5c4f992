package fsm

import (
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Subscription group settings: defaults and ranges. Apply fills the
// defaults and checks the ranges itself, so a group record always holds
// complete, valid settings whatever the proposer sent.
const (
	DefaultGroupInFlightPerConsumer = 100
	DefaultGroupInFlight            = 1000
	DefaultGroupAckTimeout          = 30 * time.Second
	DefaultGroupMaxRetries          = 10
	DefaultGroupMaxConsumers        = 100
	DefaultGroupCheckpointAfter     = 100
	DefaultGroupCheckpointInterval  = 200 * time.Millisecond

	// MaxGroupParkedBatch is the most parked messages one ReplayParked or
	// DeleteParked entry moves.
	MaxGroupParkedBatch = 1000
)

// ValidateGroupName checks a group name: the character rule of namespace
// names (ValidateNamespaceName; a group name never names a directory).
func ValidateGroupName(field, name string) error {
	if err := ValidateNamespaceName(name); err != nil {
		return &ValidationError{Field: field, Reason: err.(*ValidationError).Reason}
	}
	return nil
}

// ValidateGroupSource checks a group's source: a valid stream name, or a
// category (no '-'), or a valid query (ValidateQuery), or none of them
// (the whole namespace); never two.
func ValidateGroupSource(s *fsmv1.GroupSource) error {
	n := 0
	for _, set := range []bool{s.GetStream() != "", s.GetCategory() != "", s.GetQuery() != nil} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return invalid("source", "must be one stream, one category, one query or the whole namespace, not several")
	case s.GetStream() != "":
		return ValidateStreamName("stream", s.Stream)
	case s.GetCategory() != "":
		if strings.Contains(s.Category, "-") {
			return invalid("category", "must not contain '-': %q names a stream, not a category", s.Category)
		}
		return ValidateStreamName("category", s.Category)
	case s.GetQuery() != nil:
		return ValidateQuery("query", QueryOf(s.Query))
	}
	return nil
}

// MergeGroupSettings returns base with every non-zero field of change
// applied (max_retries when present). It does not check ranges.
func MergeGroupSettings(base, change *fsmv1.GroupSettings) *fsmv1.GroupSettings {
	out := proto.Clone(base).(*fsmv1.GroupSettings)
	if change == nil {
		return out
	}
	if change.MaxInFlightPerConsumer != 0 {
		out.MaxInFlightPerConsumer = change.MaxInFlightPerConsumer
	}
	if change.MaxInFlight != 0 {
		out.MaxInFlight = change.MaxInFlight
	}
	if change.AckTimeoutNanos != 0 {
		out.AckTimeoutNanos = change.AckTimeoutNanos
	}
	if change.MaxRetries != nil {
		out.MaxRetries = proto.Int32(*change.MaxRetries)
	}
	if change.MaxConsumers != 0 {
		out.MaxConsumers = change.MaxConsumers
	}
	if change.Strategy != fsmv1.GroupStrategy_GROUP_STRATEGY_UNSPECIFIED {
		out.Strategy = change.Strategy
	}
	if change.CheckpointAfter != 0 {
		out.CheckpointAfter = change.CheckpointAfter
	}
	if change.CheckpointIntervalNanos != 0 {
		out.CheckpointIntervalNanos = change.CheckpointIntervalNanos
	}
	return out
}

// DefaultGroupSettings returns the settings of a group created with none.
func DefaultGroupSettings() *fsmv1.GroupSettings {
	return &fsmv1.GroupSettings{
		MaxInFlightPerConsumer:  DefaultGroupInFlightPerConsumer,
		MaxInFlight:             DefaultGroupInFlight,
		AckTimeoutNanos:         int64(DefaultGroupAckTimeout),
		MaxRetries:              proto.Int32(DefaultGroupMaxRetries),
		MaxConsumers:            DefaultGroupMaxConsumers,
		Strategy:                fsmv1.GroupStrategy_GROUP_STRATEGY_ROUND_ROBIN,
		CheckpointAfter:         DefaultGroupCheckpointAfter,
		CheckpointIntervalNanos: int64(DefaultGroupCheckpointInterval),
	}
}

// ValidateGroupSettings checks complete settings (after
// MergeGroupSettings) against their ranges. Field names are those of the
// public API (skald.v1.GroupSettings).
func ValidateGroupSettings(s *fsmv1.GroupSettings) error {
	type intRange struct {
		field     string
		v, lo, hi int64
	}
	maxRetries := int64(-1)
	if s.MaxRetries != nil {
		maxRetries = int64(*s.MaxRetries)
	}
	for _, r := range []intRange{
		{"settings.max_in_flight_per_consumer", int64(s.MaxInFlightPerConsumer), 1, 10_000},
		{"settings.max_in_flight", int64(s.MaxInFlight), 1, 100_000},
		{"settings.max_retries", maxRetries, 0, 1000},
		{"settings.max_consumers", int64(s.MaxConsumers), 1, 1000},
		{"settings.checkpoint_after", int64(s.CheckpointAfter), 1, 100_000},
	} {
		if r.v < r.lo || r.v > r.hi {
			return invalid(r.field, "must be %d..%d, got %d", r.lo, r.hi, r.v)
		}
	}
	for _, r := range []struct {
		field     string
		v, lo, hi time.Duration
	}{
		{"settings.ack_timeout", time.Duration(s.AckTimeoutNanos), 100 * time.Millisecond, time.Hour},
		{"settings.checkpoint_interval", time.Duration(s.CheckpointIntervalNanos), 10 * time.Millisecond, time.Minute},
	} {
		if r.v < r.lo || r.v > r.hi {
			return invalid(r.field, "must be %v..%v, got %v", r.lo, r.hi, r.v)
		}
	}
	switch s.Strategy {
	case fsmv1.GroupStrategy_GROUP_STRATEGY_ROUND_ROBIN, fsmv1.GroupStrategy_GROUP_STRATEGY_PINNED:
	default:
		return invalid("settings.strategy", "unknown strategy %d", s.Strategy)
	}
	return nil
}

// validateGroupPositions checks a list of parked global positions: at
// most MaxGroupParkedBatch, each positive, none twice.
func validateGroupPositions(gps []int64, limit int32) error {
	if len(gps) > MaxGroupParkedBatch {
		return invalid("global_positions", "must hold at most %d, got %d", MaxGroupParkedBatch, len(gps))
	}
	if limit < 0 || limit > MaxGroupParkedBatch {
		return invalid("limit", "must be 0..%d, got %d", MaxGroupParkedBatch, limit)
	}
	seen := make(map[int64]bool, len(gps))
	for i, gp := range gps {
		if gp < 1 {
			return invalid("global_positions", "[%d] must be 1 or more, got %d", i, gp)
		}
		if seen[gp] {
			return invalid("global_positions", "[%d] %d appears twice", i, gp)
		}
		seen[gp] = true
	}
	return nil
}
