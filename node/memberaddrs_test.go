package node

import (
	"fmt"
	"maps"
	"testing"

	"github.com/skalddb/skald/internal/testutil"
)

// A running member reserves slots for the addresses of its configuration:
// on a loopback test cluster, 127.0.0.1 for its three members.
func TestNodeReservesItsMembersAddresses(t *testing.T) {
	c := newCluster(t, 3, nil)
	for _, tn := range c.Nodes {
		testutil.Until(t, waitTimeout, "node "+tn.ID()+" to reserve for its members", func() (bool, string) {
			got := tn.port.Reservations()
			return maps.Equal(got, map[string]int{"127.0.0.1": 3}), fmt.Sprintf("reserves for %v", got)
		})
	}
}
