package rpc

import (
	"context"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node/nodeapi"
)

type evMethod func(e *evdb, ctx context.Context, args evArgs) (any, *evError)

// evMethods are the /rpc methods. Reads are linearizable, so an SDK that
// writes on one node and reads on another sees its write.
var evMethods = map[string]evMethod{
	"stream.write":   (*evdb).streamWrite,
	"stream.get":     (*evdb).streamGet,
	"stream.last":    (*evdb).streamLast,
	"stream.version": (*evdb).streamVersion,
	// Skald's extensions (EventoDB's SDKs never send them).
	"stream.delete":              (*evdb).streamDelete,
	"stream.truncate":            (*evdb).streamTruncate,
	"category.deleteByWatermark": (*evdb).categoryDeleteByWatermark,
	"category.get":               (*evdb).categoryGet,
	"ns.create":                  (*evdb).nsCreate,
	"ns.delete":                  (*evdb).nsDelete,
	"ns.list":                    (*evdb).nsList,
	"ns.info":                    (*evdb).nsInfo,
	"ns.streams":                 (*evdb).nsStreams,
	"ns.categories":              (*evdb).nsCategories,
	"ns.setRetention":            (*evdb).nsSetRetention,
	"ns.retention":               (*evdb).nsRetention,
	"token.create":               (*evdb).tokenCreate,
	"token.list":                 (*evdb).tokenList,
	"token.revoke":               (*evdb).tokenRevoke,
	// Skald's version: the SDKs' tests read it as semver.
	"sys.version": func(e *evdb, _ context.Context, _ evArgs) (any, *evError) { return e.build.Version, nil },
	"sys.health": func(*evdb, context.Context, evArgs) (any, *evError) {
		return map[string]any{"status": "ok", "backend": "pebble", "connections": 0}, nil
	},
}

var linearizable = nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}

// read runs fn on a linearizable view of the caller's namespace.
func (e *evdb) read(ctx context.Context, fn func(*fsm.View) error) *evError {
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
