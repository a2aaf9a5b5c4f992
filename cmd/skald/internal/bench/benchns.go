package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// A bench run writes into a namespace of its own, created before and
// deleted after, so that measuring a cluster leaves nothing in the
// namespaces its users work in (streams of bench messages, a grown
// global position). --token-namespace writes into the token's namespace
// instead, for a namespace token, which cannot create one.

// benchNamespace creates the run's namespace with the admin token of cf
// and returns the flags to run the workload with (its token) and the
// cleanup that deletes it, which the caller must call.
func benchNamespace(ctx context.Context, cf *command.Flags, run string, stderr io.Writer) (*command.Flags, func(), error) {
	c, err := cf.Connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	name := "bench-" + run
	ns, err := c.CreateNamespace(ctx, name, "skald bench run (deleted after it)", "")
	if err != nil {
		c.Close()
		if code := connect.CodeOf(err); code == connect.CodePermissionDenied || code == connect.CodeUnauthenticated {
			return nil, nil, command.Exit(command.ExitAuth, fmt.Errorf("bench: creating namespace %s for the run needs the admin token; pass --token-namespace to write into the token's own namespace: %w", name, command.APIError(err)))
		}
		return nil, nil, command.APIError(err)
	}
	fmt.Fprintf(stderr, "bench: writing into namespace %s (deleted after the run; --token-namespace writes into the token's own)\n", name)
	cleanup := func() {
		defer c.Close()
		// Deleted even after Ctrl-C, within a bound.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := c.DeleteNamespace(dctx, name); err != nil {
			fmt.Fprintf(stderr, "bench: could not delete namespace %s: %v (skald ns delete %s --yes)\n", name, command.APIError(err), name)
			return
		}
		fmt.Fprintf(stderr, "bench: deleted namespace %s\n", name)
	}
	nf := *cf
	nf.Token = ns.Token
	return &nf, cleanup, nil
}
