package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
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
	if len(args) == 0 {
		fmt.Fprint(stderr, clusterUsage, command.ClientHelp)
		return command.Exit(command.ExitUsage, fmt.Errorf("cluster: missing subcommand"))
	}
	switch args[0] {
	case "status":
		fs, cf := command.NewFlagSet("cluster status", "skald cluster status", stderr)
		if _, err := cf.Parse(fs, args[1:], 0, 0); err != nil {
			return err
		}
		c, err := cf.Connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		st, err := c.Status(ctx)
		if err != nil {
			return command.APIError(err)
		}
		if cf.Output == "json" {
			return command.PrintJSON(stdout, command.StatusReply(st))
		}
		fmt.Fprintf(stdout, "node %s, leader %s, term %d, commit index %d, applied index %d\n\n", st.NodeID, st.LeaderID, st.Term, st.CommitIndex, st.AppliedIndex)
		return command.Table(stdout, "ID\tNAME\tROLE\tSUFFRAGE\tHEALTH\tCONTACT\tRAFT\tAPI\tAPPLIED", statusRows(st))
	case "transfer-leadership":
		fs, cf := command.NewFlagSet("cluster transfer-leadership", "skald cluster transfer-leadership [--to SERVER-ID]", stderr)
		to := fs.String("to", "", "server to hand leadership to (default: any voter)")
		if _, err := cf.Parse(fs, args[1:], 0, 0); err != nil {
			return err
		}
		c, err := leaderClient(ctx, cf, stderr)
		if err != nil {
			return err
		}
		defer c.Close()
		leader, err := c.TransferLeadership(ctx, *to)
		if err != nil {
			return command.APIError(err)
		}
		if cf.Output == "json" {
			return command.PrintJSON(stdout, &skaldv1.TransferLeadershipResponse{LeaderId: leader})
		}
		fmt.Fprintf(stdout, "Leader is now %s.\n", leader)
		return nil
	case "remove":
		fs, cf := command.NewFlagSet("cluster remove", "skald cluster remove SERVER-ID [--yes]", stderr)
		yes := command.AddYes(fs)
		rest, err := cf.Parse(fs, args[1:], 1, 1)
		if err != nil {
			return err
		}
		if err := command.Confirm("cluster remove", "removes server "+rest[0]+" from the cluster",
			"Remove server "+rest[0]+" from the cluster? It stops being a voter and leaves Raft.", *yes, os.Stdin, stderr); err != nil {
			return err
		}
		c, err := cf.Connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.RemoveServer(ctx, rest[0]); err != nil {
			return command.APIError(err)
		}
		if cf.Output == "json" {
			return command.PrintJSON(stdout, &skaldv1.RemoveServerResponse{})
		}
		fmt.Fprintf(stdout, "Removed server %s.\n", rest[0])
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, clusterUsage, command.ClientHelp)
		return nil
	}
	fmt.Fprint(stderr, clusterUsage)
	return command.Exit(command.ExitUsage, fmt.Errorf("cluster: unknown subcommand %q", args[0]))
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
