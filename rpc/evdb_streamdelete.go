package rpc

import (
	"context"
	"encoding/json"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/rpc/evdb"
)

// streamDelete is ["stream.delete", stream, {hard, expectedVersion}] →
// {"messagesDeleted": n, "version": v}: Skald's extension of the EventoDB
// API, Connect's EventStore.DeleteStream.
func (e *eventodb) streamDelete(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	stream, opts, everr := evdb.StreamAndOpts(args)
	if everr != nil {
		return nil, everr
	}
	hard, everr := opts.Bool("hard")
	if everr != nil {
		return nil, everr
	}
	ev, everr := opts.ExpectedVersion()
	if everr != nil {
		return nil, everr
	}
	c := &fsmv1.DeleteStream{Namespace: callerFrom(ctx).namespace, Stream: stream, Hard: hard, ExpectedVersion: ev}
	res, err := e.b.DeleteStream(ctx, c)
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	return map[string]any{"messagesDeleted": res.GetStreamDeletion().MessagesDeleted, "version": res.GetStreamDeletion().Version}, nil
}

// streamTruncate is ["stream.truncate", stream, {before}] →
// {"messagesDeleted": n, "version": v}.
func (e *eventodb) streamTruncate(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	stream, opts, everr := evdb.StreamAndOpts(args)
	if everr != nil {
		return nil, everr
	}
	before, ok, everr := opts.Num("before")
	if everr != nil {
		return nil, everr
	}
	if !ok || before < 0 {
		return nil, evdb.Invalid("option before is required: the first position to keep, 0 or more")
	}
	res, err := e.b.TruncateStream(ctx, &fsmv1.TruncateStream{Namespace: callerFrom(ctx).namespace, Stream: stream, Before: before})
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	return map[string]any{"messagesDeleted": res.GetStreamDeletion().MessagesDeleted, "version": res.GetStreamDeletion().Version}, nil
}

// categoryDeleteByWatermark is ["category.deleteByWatermark", category,
// {"watermarks": {stream: position}, "types": [...]}] →
// {"messagesDeleted": n, "streams": k}: Connect's
// EventStore.DeleteByWatermark.
func (e *eventodb) categoryDeleteByWatermark(ctx context.Context, args evdb.Args) (any, *evdb.Error) {
	category, everr := args.NonEmpty(0, "categoryName")
	if everr != nil {
		return nil, everr
	}
	opts, everr := args.Opts(1)
	if everr != nil {
		return nil, everr
	}
	var marks map[string]int64
	if raw, ok := opts["watermarks"]; !ok || evdb.IsNull(raw) || json.Unmarshal(raw, &marks) != nil {
		return nil, evdb.Invalid("option watermarks is required: an object of stream name to the last position to remove")
	}
	var types []string
	if raw, ok := opts["types"]; ok && !evdb.IsNull(raw) && json.Unmarshal(raw, &types) != nil {
		return nil, evdb.Invalid("option types must be an array of strings")
	}
	c, err := watermarkCommand(callerFrom(ctx).namespace, category, marks, types)
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	res, err := e.b.DeleteByWatermark(ctx, c)
	if err != nil {
		return nil, e.backendError(ctx, err)
	}
	return map[string]any{"messagesDeleted": res.GetWatermarkDeletion().MessagesDeleted, "streams": res.GetWatermarkDeletion().Streams}, nil
}
