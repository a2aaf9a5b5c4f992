package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	skaldv1 "github.com/skalddb/skald/rpc/gen/skald/v1"
)

const nsUsage = `Usage: skald ns <create|list|info|delete> ...

  skald ns create NAME [--description TEXT] [--ns-token TOKEN] [--dedupe-window D|off|forever]   (admin token)
  skald ns list                                                  (admin token)
  skald ns info NAME                                             (admin, or the namespace's own token)
  skald ns delete NAME                                           (admin token)
`

func runNS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, nsUsage, clientHelp)
		return &exitError{exitUsage, fmt.Errorf("ns: missing subcommand")}
	}
	switch args[0] {
	case "create":
		fs, cf := newClientFlagSet("ns create", "skald ns create NAME [--description TEXT] [--ns-token TOKEN] [--dedupe-window D|off|forever]", stderr)
		desc := fs.String("description", "", "what the namespace is for")
		nsToken := fs.String("ns-token", "", "use this token for the namespace instead of a generated one")
		dedupe := fs.String("dedupe-window", "", "idempotent writes: how long message ids given by clients are remembered (a write of ids\n"+
			"already written returns the original positions): a duration of 1s or more, off, or forever (default: the server's, 2m)")
		rest, err := cf.parse(fs, args[1:], 1, 1)
		if err != nil {
			return err
		}
		req := &skaldv1.CreateRequest{Name: rest[0], Description: *desc, Token: *nsToken}
		switch *dedupe {
		case "":
		case "off", "0":
			req.DedupeWindow = durationpb.New(0)
		case "forever":
			req.DedupeForever = true
		default:
			d, err := time.ParseDuration(*dedupe)
			if err != nil {
				return &exitError{exitUsage, fmt.Errorf("ns create: --dedupe-window %q: want a duration (2m, 1h), off or forever", *dedupe)}
			}
			req.DedupeWindow = durationpb.New(d)
		}
		resp, err := cf.clients().namespaces.Create(ctx, connect.NewRequest(req))
		if err != nil {
			return apiError(err)
		}
		if cf.output == "json" {
			return printJSON(stdout, resp.Msg)
		}
		fmt.Fprintf(stdout, "Created namespace %s.\nToken (shown only now; keep it): %s\n", resp.Msg.Name, resp.Msg.Token)
		return nil
	case "list":
		fs, cf := newClientFlagSet("ns list", "skald ns list", stderr)
		if _, err := cf.parse(fs, args[1:], 0, 0); err != nil {
			return err
		}
		resp, err := cf.clients().namespaces.List(ctx, connect.NewRequest(&skaldv1.ListRequest{}))
		if err != nil {
			return apiError(err)
		}
		if cf.output == "json" {
			return printJSON(stdout, resp.Msg)
		}
		var rows [][]string
		for _, n := range resp.Msg.Namespaces {
			rows = append(rows, nsRow(n))
		}
		return table(stdout, "NAME\tMESSAGES\tSTREAMS\tCREATED\tLAST ACTIVITY\tDESCRIPTION", rows)
	case "info":
		fs, cf := newClientFlagSet("ns info", "skald ns info NAME", stderr)
		rest, err := cf.parse(fs, args[1:], 1, 1)
		if err != nil {
			return err
		}
		resp, err := cf.clients().namespaces.Get(ctx, connect.NewRequest(&skaldv1.GetRequest{Name: rest[0]}))
		if err != nil {
			return apiError(err)
		}
		if cf.output == "json" {
			return printJSON(stdout, resp.Msg)
		}
		row := append(nsRow(resp.Msg), dedupeOf(resp.Msg))
		return table(stdout, "NAME\tMESSAGES\tSTREAMS\tCREATED\tLAST ACTIVITY\tDESCRIPTION\tDEDUPE WINDOW", [][]string{row})
	case "delete":
		fs, cf := newClientFlagSet("ns delete", "skald ns delete NAME", stderr)
		rest, err := cf.parse(fs, args[1:], 1, 1)
		if err != nil {
			return err
		}
		resp, err := cf.clients().namespaces.Delete(ctx, connect.NewRequest(&skaldv1.DeleteRequest{Name: rest[0]}))
		if err != nil {
			return apiError(err)
		}
		if cf.output == "json" {
			return printJSON(stdout, resp.Msg)
		}
		fmt.Fprintf(stdout, "Deleted namespace %s (%d messages).\n", resp.Msg.Name, resp.Msg.MessagesDeleted)
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, nsUsage, clientHelp)
		return nil
	}
	fmt.Fprint(stderr, nsUsage)
	return &exitError{exitUsage, fmt.Errorf("ns: unknown subcommand %q", args[0])}
}

func nsRow(n *skaldv1.NamespaceInfo) []string {
	return []string{n.Name, strconv.FormatInt(n.MessageCount, 10), strconv.FormatInt(n.StreamCount, 10), when(n.CreatedAt), when(n.LastActivity), n.Description}
}

// dedupeOf is a namespace's idempotent-write window as ns create takes it.
func dedupeOf(n *skaldv1.NamespaceInfo) string {
	switch {
	case n.DedupeForever:
		return "forever"
	case n.DedupeWindow.AsDuration() == 0:
		return "off"
	}
	return n.DedupeWindow.AsDuration().String()
}

func when(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().Format(time.RFC3339)
}
