package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

const clusterUsage = `Usage: skald cluster <status|transfer-leadership|remove> ...   (admin token)

  skald cluster status
  skald cluster transfer-leadership [--to SERVER-ID]   (through a follower: forwarded to the leader)
  skald cluster remove SERVER-ID [--yes]               (from any node; asks first on a terminal)
  skald leave                                          (the --addr node leaves the cluster and stops)
`

func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "cluster", clusterUsage, map[string]runFunc{
		"status": clusterStatus.Run, "transfer-leadership": transferLeadership(stderr).Run, "remove": clusterRemove(stderr).Run,
	}, args, stdout, stderr)
}

var clusterStatus = command.Command[client.ClusterStatus]{
	Name: "cluster status", Usage: "skald cluster status",
	Call: func(ctx context.Context, c *client.Client, _ []string) (client.ClusterStatus, error) {
		return c.Status(ctx)
	},
	Text: func(w io.Writer, _ []string, st client.ClusterStatus) error {
		fmt.Fprintf(w, "node %s, leader %s, term %d, commit index %d, applied index %d\n\n", st.NodeID, st.LeaderID, st.Term, st.CommitIndex, st.AppliedIndex)
		return command.Table(w, "ID\tNAME\tROLE\tSUFFRAGE\tHEALTH\tCONTACT\tRAFT\tAPI\tAPPLIED", statusRows(st))
	},
	JSON: func(st client.ClusterStatus) any { return statusReply(st) }, // suffrage as the API names it
}

// transferLeadership is cluster transfer-leadership: it calls the leader,
// saying on stderr when --addr is a follower.
func transferLeadership(stderr io.Writer) command.Command[string] {
	var to *string
	return command.Command[string]{
		Name: "cluster transfer-leadership", Usage: "skald cluster transfer-leadership [--to SERVER-ID]",
		Flags: func(fs *flag.FlagSet) func([]string) error {
			to = fs.String("to", "", "server to hand leadership to (default: any voter)")
			return nil
		},
		Dial: func(ctx context.Context, cf *command.Flags) (*client.Client, error) {
			return leaderClient(ctx, cf, stderr)
		},
		Call: func(ctx context.Context, c *client.Client, _ []string) (string, error) {
			return c.TransferLeadership(ctx, *to)
		},
		Text: func(w io.Writer, _ []string, leader string) error {
			_, err := fmt.Fprintf(w, "Leader is now %s.\n", leader)
			return err
		},
		JSON: func(leader string) any { return struct{ LeaderID string }{leader} },
	}
}

// clusterRemove is cluster remove: it asks on stderr's terminal first.
func clusterRemove(stderr io.Writer) command.Command[struct{}] {
	var yes *bool
	return command.Command[struct{}]{
		Name: "cluster remove", Usage: "skald cluster remove SERVER-ID [--yes]", MinArgs: 1, MaxArgs: 1,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			yes = command.AddYes(fs)
			return func(args []string) error {
				return command.Confirm("cluster remove", "removes server "+args[0]+" from the cluster",
					"Remove server "+args[0]+" from the cluster? It stops being a voter and leaves Raft.", *yes, os.Stdin, stderr)
			}
		},
		Call: func(ctx context.Context, c *client.Client, args []string) (struct{}, error) {
			return struct{}{}, c.RemoveServer(ctx, args[0])
		},
		Text: func(w io.Writer, args []string, _ struct{}) error {
			_, err := fmt.Fprintf(w, "Removed server %s.\n", args[0])
			return err
		},
	}
}

func runLeave(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("leave", "skald leave --addr NODE [--if-scaled-down]   (admin token: the node leaves the cluster and stops)", stderr, command.NoOutput)
	ifScaledDown := fs.Bool("if-scaled-down", false, "Kubernetes preStop hook: leave only when this pod's StatefulSet was scaled below it (not on restarts or rolling updates)")
	if _, err := cf.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	if eps, _ := cf.Endpoints(); len(eps) > 1 {
		return cf.UsageError(fs, "--addr names the node that leaves: give one node, not a list")
	}
	if *ifScaledDown {
		pod := os.Getenv("POD_NAME")
		if pod == "" {
			pod, _ = os.Hostname()
		}
		api, err := inClusterAPI(serviceAccountDir)
		if err != nil {
			return command.Exit(command.ExitFailure, fmt.Errorf("--if-scaled-down: %w", err))
		}
		down, why, err := api.scaledDown(ctx, pod)
		if err != nil {
			return command.Exit(command.ExitFailure, fmt.Errorf("--if-scaled-down: %w", err))
		}
		if !down {
			fmt.Fprintf(stdout, "Not leaving: %s (a restart, not a scale-down).\n", why)
			return nil
		}
		fmt.Fprintf(stdout, "Leaving: %s.\n", why)
	}
	c, err := cf.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	id, err := c.Leave(ctx, cf.BaseURL())
	if err != nil {
		return command.APIError(err)
	}
	fmt.Fprintf(stdout, "Node %s left the cluster and is stopping.\n", id)
	return nil
}

// statusRows are cluster status's table rows, one per server. HEALTH is
// "unreachable" for a server the serving node could not ask (its role is
// then unknown unless it is the leader Raft knows of), else autopilot's
// verdict; CONTACT is the time since it last heard from the leader.
func statusRows(st client.ClusterStatus) [][]string {
	var rows [][]string
	for _, s := range st.Servers {
		name := s.Name
		if name == "" {
			name = "-"
		}
		role := "follower"
		switch {
		case s.ID == st.LeaderID:
			role = "leader"
		case s.Unreachable:
			role = "-"
		}
		suffrage := "voter"
		if !s.Voter {
			suffrage = "nonvoter"
		}
		health := "unhealthy"
		switch {
		case s.Unreachable:
			health = "unreachable"
		case s.Healthy:
			health = "healthy"
		}
		contact := "-"
		if s.LastContact >= 0 && !s.Unreachable {
			contact = s.LastContact.Round(time.Millisecond).String()
		}
		applied := "-"
		if s.AppliedIndex > 0 && !s.Unreachable {
			applied = strconv.FormatUint(s.AppliedIndex, 10)
		}
		rows = append(rows, []string{s.ID, name, role, suffrage, health, contact, s.RaftAddress, s.APIAddress, applied})
	}
	return rows
}
