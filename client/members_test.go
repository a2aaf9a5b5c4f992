package client

import (
	"testing"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
)

// The members are the discovered addresses plus the configured endpoints
// (a load balancer stays usable), the leader is the one Status names, and
// a hint only ever points at a member.
func TestViewUpdateAndHints(t *testing.T) {
	v := newView([]string{"http://lb:8080", "http://10.0.0.1:8080"}, func(url string) *member { return &member{url: url} }, 0)
	v.update(&skaldv1.StatusResponse{LeaderId: "b", Servers: []*skaldv1.Server{
		{Id: "a", ApiAddress: "10.0.0.1:8080"}, {Id: "b", ApiAddress: "10.0.0.2:8080"}, {Id: "c", ApiAddress: "10.0.0.3:8080"},
	}}, "http")
	var got []string
	for _, m := range v.mu.members {
		got = append(got, m.url)
	}
	want := []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080", "http://10.0.0.3:8080", "http://lb:8080"}
	if len(got) != len(want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("members %v, want %v", got, want)
		}
	}
	if v.mu.leader == nil || v.mu.leader.url != "http://10.0.0.2:8080" {
		t.Fatalf("leader %v, want http://10.0.0.2:8080", v.mu.leader)
	}
	v.hint("192.168.1.1:8080") // not a member: ignored
	if v.mu.leader.url != "http://10.0.0.2:8080" {
		t.Fatalf("a hint outside the members moved the leader to %s", v.mu.leader.url)
	}
	v.hint("10.0.0.3:8080")
	if v.mu.leader.url != "http://10.0.0.3:8080" {
		t.Fatalf("leader %s after a hint at a member, want http://10.0.0.3:8080", v.mu.leader.url)
	}
}
