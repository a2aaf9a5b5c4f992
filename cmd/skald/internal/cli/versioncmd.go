package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/skalddb/skald/cmd/skald/internal/command"
	"github.com/skalddb/skald/internal/buildinfo"
)

// VersionJSON is `skald version -o json`: the same fields as the server's
// GET /version.
type VersionJSON struct {
	buildinfo.Info
	EventoDB string `json:"eventodb"`
}

// runVersion prints this binary's version, the commit it was built from
// and the Go release that built it.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: skald version [-o table|json]")
		fs.PrintDefaults()
	}
	output := fs.String("o", "table", "output: table or json")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return command.Exit(command.ExitUsage, err)
	}
	if fs.NArg() > 0 {
		return command.Exit(command.ExitUsage, fmt.Errorf("version takes no arguments, got %q", fs.Arg(0)))
	}
	info := buildinfo.Read()
	switch *output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(VersionJSON{Info: info, EventoDB: buildinfo.EventoDBAPI})
	case "table":
	default:
		return command.Exit(command.ExitUsage, fmt.Errorf("-o %q: want table or json", *output))
	}
	revision := "unknown (not recorded in this build)"
	if info.Revision != "" {
		revision = info.Revision
		if info.Modified {
			revision += " (with uncommitted changes)"
		}
	}
	_, err := fmt.Fprintf(stdout, "skald %s\ncommit:       %s\ngo:           %s\neventodb api: %s\n",
		info.Version, revision, info.GoVersion, buildinfo.EventoDBAPI)
	return err
}
