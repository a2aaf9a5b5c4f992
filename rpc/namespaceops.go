package rpc

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/internal/nstoken"
	"github.com/skalddb/skald/node/nodeapi"
)

// The namespace operations both APIs call (Namespaces and EventoDB's
// ns.*): each surface reads its request, calls these, and translates the
// result, and the errors through errorTable, into its own shape.

// badTokenError is a token given to create a namespace that is not a
// well-formed token of that namespace.
type badTokenError struct {
	err   error  // why the token does not parse; nil when it parses
	named string // the namespace it names (err nil)
	want  string // the namespace being created
}

func (e *badTokenError) Error() string {
	if e.err != nil {
		return "token: " + e.err.Error()
	}
	return fmt.Sprintf("token names namespace %q, not %q", e.named, e.want)
}

// namespaceToken returns the token a namespace created as name gets: token
// when given, which must be a well-formed token of name (else a
// *badTokenError), or a new one when it is empty.
func namespaceToken(name, token string) (string, error) {
	if token == "" {
		return nstoken.New(name)
	}
	tn, err := nstoken.Parse(token)
	switch {
	case err != nil:
		return "", &badTokenError{err: err, want: name}
	case tn != name:
		return "", &badTokenError{named: tn, want: name}
	}
	return token, nil
}

// namespaceStats reads a namespace's registry entry and counters on one
// view.
func namespaceStats(ctx context.Context, b tenants, name string, opts nodeapi.ReadOptions) (fsm.NamespaceInfo, fsm.NamespaceStats, error) {
	var (
		info  fsm.NamespaceInfo
		stats fsm.NamespaceStats
	)
	_, err := b.Read(ctx, name, opts, func(v *fsm.View) (err error) {
		info = v.Namespace()
		stats, err = v.Stats()
		return err
	})
	return info, stats, err
}

// namespaceEntry is one namespace of a listing.
type namespaceEntry struct {
	info  fsm.NamespaceInfo
	stats fsm.NamespaceStats
}

// MaxNamespacesPage bounds one namespace listing (Namespaces.List,
// ns.list): each entry opens its namespace for its counters.
const MaxNamespacesPage = 1000

// listNamespaces returns up to limit namespaces (0: MaxNamespacesPage)
// whose name sorts after cursor, in byte order, with their counters, and
// the cursor of the next page ("" when nothing follows). A linearizable
// barrier first makes the list include every namespace whose creation was
// acknowledged; each is then read on a local view, and one deleted
// meanwhile is left out.
func listNamespaces(ctx context.Context, b tenants, cursor string, limit int) ([]namespaceEntry, string, error) {
	if limit <= 0 || limit > MaxNamespacesPage {
		limit = MaxNamespacesPage
	}
	if err := b.ReadBarrier(ctx, nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}); err != nil {
		return nil, "", err
	}
	all := b.Namespaces() // sorted by name
	i := sort.Search(len(all), func(i int) bool { return all[i].Name > cursor })
	out := []namespaceEntry{}
	for _, ns := range all[i:] {
		if len(out) == limit {
			return out, out[limit-1].info.Name, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		info, stats, err := namespaceStats(ctx, b, ns.Name, nodeapi.ReadOptions{Consistency: nodeapi.Local})
		if errors.Is(err, fsm.ErrNamespaceNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, "", err
		}
		out = append(out, namespaceEntry{info, stats})
	}
	return out, "", nil
}
