package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// leaderClient connects to the leader for a call only the leader takes
// (transfer-leadership): the CLI's client stays on the --addr node, so
// when that node is a follower the call goes to the leader's API address
// from its cluster status, as etcdctl move-leader finds the leader, and
// stderr says so. The leader is called with --addr's scheme.
func leaderClient(ctx context.Context, cf *command.Flags, stderr io.Writer) (*client.Client, error) {
	c, err := cf.Connect(ctx)
	if err != nil {
		return nil, err
	}
	st, err := c.Status(ctx)
	if err != nil {
		c.Close()
		return nil, command.APIError(err)
	}
	if st.LeaderID == "" || st.LeaderID == st.NodeID {
		return c, nil // the leader, or none yet: the server's answer says so
	}
	c.Close()
	var self, leader string
	for _, s := range st.Servers {
		switch s.ID {
		case st.NodeID:
			self = s.APIAddress
		case st.LeaderID:
			leader = s.APIAddress
		}
	}
	if leader == "" {
		return nil, command.Exit(command.ExitUnavailable, fmt.Errorf("the node at --addr is a follower and the leader %s has not told its API address yet: retry, or call the leader", st.LeaderID))
	}
	if self == "" {
		self = cf.BaseURL()
	}
	scheme := "http://"
	if strings.HasPrefix(cf.BaseURL(), "https://") {
		scheme = "https://"
	}
	fmt.Fprintf(stderr, "skald: %s is a follower; forwarding to the leader at %s\n", self, leader)
	lf := *cf
	lf.Addr = scheme + leader
	return lf.Connect(ctx)
}
