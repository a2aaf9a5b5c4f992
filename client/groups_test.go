package client

import (
	"testing"
	"time"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// TestGroupSettingsHelpers: WithMaxRetries and WithStrategy set what the
// pointer fields set, zero values included, leave the receiver as it was,
// and a settings value without them sends neither.
func TestGroupSettingsHelpers(t *testing.T) {
	base := GroupSettings{AckTimeout: time.Second}
	for _, tc := range []struct {
		name         string
		s            GroupSettings
		wantRetries  *int32
		wantStrategy skaldv1.ConsumerStrategy
	}{
		{"neither", base, nil, skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_UNSPECIFIED},
		{"no retries", base.WithMaxRetries(0), ptr(int32(0)), skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_UNSPECIFIED},
		{"retries, pinned", base.WithMaxRetries(7).WithStrategy(Pinned), ptr(int32(7)), skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED},
		{"round robin", base.WithStrategy(RoundRobin), nil, skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_ROUND_ROBIN},
		{"the fields as before", GroupSettings{MaxRetries: ptr(int32(3)), Strategy: ptr(Pinned)}, ptr(int32(3)), skaldv1.ConsumerStrategy_CONSUMER_STRATEGY_PINNED},
	} {
		w := tc.s.wire()
		if (w.MaxRetries == nil) != (tc.wantRetries == nil) || w.MaxRetries != nil && *w.MaxRetries != *tc.wantRetries {
			t.Errorf("%s: max_retries %v, want %v", tc.name, w.MaxRetries, tc.wantRetries)
		}
		if w.Strategy != tc.wantStrategy {
			t.Errorf("%s: strategy %v, want %v", tc.name, w.Strategy, tc.wantStrategy)
		}
	}
	if base.MaxRetries != nil || base.Strategy != nil {
		t.Errorf("the helpers changed their receiver: %+v", base)
	}
	a := base.WithMaxRetries(1)
	b := a.WithMaxRetries(2)
	if *a.MaxRetries != 1 || *b.MaxRetries != 2 {
		t.Errorf("settings derived from one another share MaxRetries: %d, %d", *a.MaxRetries, *b.MaxRetries)
	}
}

func ptr[T any](v T) *T { return &v }
