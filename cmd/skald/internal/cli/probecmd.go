package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/skalddb/skald/cmd/skald/internal/command"
)

const probeUsage = `Usage: skald probe URL

For container health checks in images without curl: exit 0 when GET URL
answers 200 within 5 s, 6 otherwise (2 for a bad URL). Example:
  skald probe http://127.0.0.1:8080/readyz
`

// runProbe is for container health checks in images without curl:
// `skald probe URL` exits 0 when GET URL answers 200 within 5 s.
func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stderr, probeUsage)
		return flag.ErrHelp
	}
	if len(args) != 1 {
		fmt.Fprint(stderr, probeUsage)
		return command.Exit(command.ExitUsage, fmt.Errorf("probe: want one URL"))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return command.Exit(command.ExitUsage, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return command.Exit(command.ExitUnavailable, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return command.Exit(command.ExitUnavailable, fmt.Errorf("probe: %s", resp.Status))
	}
	return nil
}
