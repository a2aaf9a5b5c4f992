package rpc

import (
	"context"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/rpc/evdb"
)

type evMethod func(e *eventodb, ctx context.Context, args evdb.Args) (any, *evdb.Error)

// evMethods are the /rpc methods. Reads are linearizable, so an SDK that
// writes on one node and reads on another sees its write.
var evMethods = map[string]evMethod{
	"stream.write":   (*eventodb).streamWrite,
	"stream.get":     (*eventodb).streamGet,
	"stream.last":    (*eventodb).streamLast,
	"stream.version": (*eventodb).streamVersion,
	// Skald's extensions (EventoDB's SDKs never send them).
	"stream.delete":              (*eventodb).streamDelete,
	"stream.truncate":            (*eventodb).streamTruncate,
	"category.deleteByWatermark": (*eventodb).categoryDeleteByWatermark,
	"category.get":               (*eventodb).categoryGet,
	"ns.create":                  (*eventodb).nsCreate,
	"ns.delete":                  (*eventodb).nsDelete,
	"ns.list":                    (*eventodb).nsList,
	"ns.info":                    (*eventodb).nsInfo,
	"ns.streams":                 (*eventodb).nsStreams,
	"ns.categories":              (*eventodb).nsCategories,
	"ns.setRetention":            (*eventodb).nsSetRetention,
	"ns.retention":               (*eventodb).nsRetention,
	"token.create":               (*eventodb).tokenCreate,
	"token.list":                 (*eventodb).tokenList,
	"token.revoke":               (*eventodb).tokenRevoke,
	// Skald's version: the SDKs' tests read it as semver.
	"sys.version": func(e *eventodb, _ context.Context, _ evdb.Args) (any, *evdb.Error) { return e.build.Version, nil },
	"sys.health": func(*eventodb, context.Context, evdb.Args) (any, *evdb.Error) {
		return map[string]any{"status": "ok", "backend": "pebble", "connections": 0}, nil
	},
}

var linearizable = nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}

// read runs fn on a linearizable view of the caller's namespace.
func (e *eventodb) read(ctx context.Context, fn func(*fsm.View) error) *evdb.Error {
	// EventoDB's replies have no way to say "read on from here", so its
	// reads have no scan budget: a read ends with its reply's deadline.
	if e.limits.WriteTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.limits.WriteTimeout)
		defer cancel()
	}
	if _, err := e.b.Read(ctx, callerFrom(ctx).namespace, linearizable, fn); err != nil {
		return e.backendError(ctx, err)
	}
	return nil
}
