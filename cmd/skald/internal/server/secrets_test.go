package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// The cluster secret keys the cluster port's mutual TLS: a cluster
// cannot start without one every node shares, a short one is refused,
// and each source gives the secret it should.
func TestClusterSecret(t *testing.T) {
	cases := []struct {
		name    string
		flags   serverFlags
		code    int    // exit code of the error; 0: none
		errText string // in the error
		secret  func(string) bool
	}{
		{"a cluster without a shared secret", serverFlags{bootstrapExpect: 3}, 2, "a cluster needs --gossip-key", nil},
		{"a short --cluster-secret", serverFlags{clusterSecret: "short-secret"}, 2, "want at least 16", nil},
		{"--cluster-secret as given", serverFlags{clusterSecret: "sixteen-bytes-ok", bootstrapExpect: 3}, 0, "", func(s string) bool { return s == "sixteen-bytes-ok" }},
		{"derived from the gossip key", serverFlags{gossipKey: testGossipKey, bootstrapExpect: 3}, 0, "", func(s string) bool { return len(s) == 64 }},
		{"a single node: random", serverFlags{}, 0, "", func(s string) bool { return len(s) == 64 }},
	}
	for _, tc := range cases {
		_, secret, err := tc.flags.secrets()
		var ee *command.ExitError
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.code != 0 && (!errors.As(err, &ee) || ee.Code != tc.code || !strings.Contains(err.Error(), tc.errText)):
			t.Errorf("%s: %v, want exit %d saying %q", tc.name, err, tc.code, tc.errText)
		case tc.secret != nil && !tc.secret(secret):
			t.Errorf("%s: secret %q", tc.name, secret)
		}
	}
	// The same gossip key gives every node the same secret; two single
	// nodes get different ones.
	a, b := secretOf(t, serverFlags{gossipKey: testGossipKey}), secretOf(t, serverFlags{gossipKey: testGossipKey})
	c, d := secretOf(t, serverFlags{}), secretOf(t, serverFlags{})
	if a != b || c == d {
		t.Fatalf("derived %q and %q (want equal), random %q and %q (want different)", a, b, c, d)
	}
}

func secretOf(t *testing.T, f serverFlags) string {
	t.Helper()
	_, s, err := f.secrets()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
