package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/rpc/evdb"
)

// evPages is the reply of a stream.get or category.get with batchSize -1
// (every message): it is read and written a page at a time from one
// consistent view, so the server holds one page (Limits.PageBytes) and a
// write buffer, however many messages follow, instead of the whole reply.
type evPages struct {
	from   int64 // where the first page starts
	read   func(v *fsm.View, from int64, limit int) ([]fsm.Message, error)
	next   func(m *fsm.Message) int64 // where the page after m starts
	format func(m *fsm.Message) []any
}

// readPages answers p's messages: all of them, read page by page while
// the reply is written (writePages), when limit < 0 (batchSize -1); else
// the first page of at most limit messages, read from one view.
func (e *eventodb) readPages(ctx context.Context, p *evPages, limit int) (any, *evdb.Error) {
	if limit < 0 {
		return p, nil
	}
	out := []any{}
	hold := holdFrom(ctx)
	everr := e.read(ctx, func(v *fsm.View) error {
		// Once the read may start (past its barrier), not while it waits.
		if err := hold.reserve(ctx, e.limits.PageBytes+replyOverhead); err != nil {
			return err
		}
		v.SetPageBytes(e.limits.PageBytes)
		msgs, err := p.read(v, p.from, limit)
		for i := range msgs {
			out = append(out, p.format(&msgs[i]))
		}
		hold.keep(v.LastPageBytes() + replyOverhead)
		return err
	})
	return out, everr
}

// evPagesBuffer is the write buffer of a paged reply.
const evPagesBuffer = 64 << 10

// writePages answers with p's messages as one JSON array, the same bytes
// writeJSON would send. An error before the first byte is an ordinary
// error reply; after it, the reply is aborted (the connection is closed
// or the HTTP/2 stream reset), so a client never takes a cut array for a
// whole one. Each write must finish within Limits.WriteTimeout: a client
// that stops reading is cut off, one that reads slowly is not.
func (e *eventodb) writePages(ctx context.Context, w http.ResponseWriter, p *evPages) {
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(writerFunc(func(b []byte) (int, error) {
		_ = rc.SetWriteDeadline(time.Now().Add(e.limits.WriteTimeout))
		return w.Write(b)
	}), evPagesBuffer)
	started := false
	start := func() {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			bw.WriteByte('[')
		}
	}
	n := 0
	var writeErr error // the client's side failed: nothing to answer
	hold := holdFrom(ctx)
	_, err := e.b.Read(ctx, callerFrom(ctx).namespace, linearizable, func(v *fsm.View) error {
		v.SetPageBytes(e.limits.PageBytes)
		for from := p.from; ; {
			// A page holds the budget from its read until it is written.
			hold.release()
			if err := hold.reserve(ctx, e.limits.PageBytes+replyOverhead); err != nil {
				return err
			}
			msgs, err := p.read(v, from, -1)
			if err != nil {
				return err
			}
			hold.keep(v.LastPageBytes() + replyOverhead)
			start()
			for i := range msgs {
				item, err := json.Marshal(p.format(&msgs[i]))
				if err != nil {
					return fmt.Errorf("encode message %d: %w", msgs[i].GlobalPosition, err)
				}
				if n > 0 {
					bw.WriteByte(',')
				}
				n++
				if _, writeErr = bw.Write(item); writeErr != nil {
					return writeErr
				}
			}
			if !v.PageCapped() || len(msgs) == 0 {
				return nil
			}
			from = p.next(&msgs[len(msgs)-1])
		}
	})
	switch {
	case err == nil:
		start()
		bw.WriteString("]\n")
		if writeErr = bw.Flush(); writeErr == nil {
			return
		}
	case !started:
		evdb.WriteError(w, e.backendError(ctx, err))
		return
	case writeErr == nil:
		e.log.Error("paged reply: read failed after the reply began", "err", err, "messages", n)
	}
	panic(http.ErrAbortHandler) // the reply is cut: never let it look whole
}

// writerFunc is an io.Writer from a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
