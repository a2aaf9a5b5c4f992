package nodeapi

import (
	"testing"
	"time"
)

// TestHealthRule: the rule Cluster.Status applies off the leader is
// autopilot's, with its defaults for zero thresholds.
func TestHealthRule(t *testing.T) {
	leader := Progress{Term: 7, LastIndex: 5000}
	cases := []struct {
		name string
		rule HealthRule
		p    Progress
		lead Progress
		want bool
	}{
		{"the leader itself", HealthRule{}, leader, leader, true},
		{"a follower in step", HealthRule{}, Progress{LastContact: 40 * time.Millisecond, Term: 7, LastIndex: 4990}, leader, true},
		{"heard from the leader 10 s ago (the default threshold)", HealthRule{}, Progress{LastContact: 10 * time.Second, Term: 7, LastIndex: 5000}, leader, true},
		{"past the default threshold", HealthRule{}, Progress{LastContact: 10*time.Second + 1, Term: 7, LastIndex: 5000}, leader, false},
		{"past a local threshold", HealthRule{LastContactThreshold: 500 * time.Millisecond}, Progress{LastContact: time.Second, Term: 7, LastIndex: 5000}, leader, false},
		{"never heard from a leader", HealthRule{}, Progress{LastContact: -1, Term: 7, LastIndex: 5000}, leader, false},
		{"another term", HealthRule{}, Progress{Term: 6, LastIndex: 5000}, leader, false},
		{"1000 entries behind (the default)", HealthRule{}, Progress{Term: 7, LastIndex: 4000}, leader, true},
		{"1001 entries behind", HealthRule{}, Progress{Term: 7, LastIndex: 3999}, leader, false},
		{"10 behind, 5 allowed", HealthRule{MaxTrailingLogs: 5}, Progress{Term: 7, LastIndex: 4990}, leader, false},
		{"a leader without a log", HealthRule{}, Progress{Term: 1}, Progress{Term: 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rule.Healthy(tc.p, tc.lead); got != tc.want {
				t.Fatalf("Healthy(%+v, %+v) = %v, want %v", tc.p, tc.lead, got, tc.want)
			}
		})
	}
}
