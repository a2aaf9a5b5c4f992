package rpc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/skalddb/skald/fsm"
	"github.com/skalddb/skald/node/nodeapi"
	"github.com/skalddb/skald/rpc/evdb"
)

// pokeBytes bounds one position in a page of pokes as the page byte cap
// counts it (fsm.View.ReadPositions): its fixed part and the longest
// stream name.
const pokeBytes = 32 + 512

// subscribe serves GET /subscribe: server-sent pokes, one per message
// ({"stream","position","globalPosition"}), first for stored matches from
// the position (none for all=true), then live as this node applies writes.
func (e *eventodb) subscribe(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, everr := e.authenticate(ctx, r)
	if everr != nil {
		evdb.WriteError(w, everr)
		return
	}
	if everr := evPermit(c, evSubscribePath, nil); everr != nil {
		evdb.WriteError(w, everr)
		return
	}
	q, msg := evdb.ParseSubscribe(r)
	if msg != "" {
		evdb.SubscribeBadRequest(w, "%s", msg)
		return
	}
	sub, all := &subscription{stream: q.Stream, category: q.Category, next: q.Next, member: q.Member, size: q.Size}, q.All
	if everr := evScope(c, evSubscribePath, sub.stream, sub.category); everr != nil {
		evdb.WriteError(w, everr)
		return
	}
	watch := e.b.Feed().Watch(c.namespace)
	if err := e.b.ReadBarrier(ctx, linearizable); err != nil {
		evdb.WriteError(w, e.backendError(ctx, err))
		return
	}
	local := nodeapi.ReadOptions{Consistency: nodeapi.Local}
	if all {
		// No replay: live from the head (or the position, if later).
		_, err := e.b.Read(ctx, c.namespace, local, func(v *fsm.View) error {
			head, err := v.NextGlobalPosition()
			sub.next = max(sub.next, head)
			return err
		})
		if err != nil {
			evdb.WriteError(w, e.backendError(ctx, err))
			return
		}
	}
	flusher, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	if all {
		fmt.Fprint(w, ": ready\n\n")
	}
	if flusher != nil {
		flusher.Flush()
	}
	cfg := e.sub.withDefaults()
	hold := e.replies.hold()
	defer hold.release()
	recheck := time.NewTicker(credentialRecheck)
	defer recheck.Stop()
	for {
		changed, ended := watch.Changed()
		if ended {
			return
		}
		if err := stillValid(e.b, c); err != nil {
			// The credential was revoked or expired: say so and end.
			body, _ := json.Marshal(e.backendError(ctx, err).Body())
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", body)
			return
		}
		var (
			pokes []fsm.Position
			more  bool
		)
		// A page holds the reply budget from its read until it is written;
		// a page of pokes weighs at most Page positions of the longest
		// stream name.
		if err := hold.reserve(ctx, min(cfg.PageBytes, cfg.Page*pokeBytes)+replyOverhead); err != nil {
			body, _ := json.Marshal(e.backendError(ctx, err).Body())
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", body)
			return
		}
		if strings.Contains(sub.category, "-") {
			pokes = nil // a stream name: matches nothing
		} else if _, err := e.b.Read(ctx, c.namespace, local, func(v *fsm.View) (err error) {
			pokes, more, err = sub.positions(v, cfg)
			hold.keep(v.LastPageBytes() + replyOverhead)
			return err
		}); err != nil {
			return // namespace gone or node stopping: the client reconnects
		}
		for _, p := range pokes {
			data, _ := json.Marshal(map[string]any{"stream": p.Stream, "position": p.Position,
				"globalPosition": p.GlobalPosition})
			if _, err := fmt.Fprintf(w, "event: poke\ndata: %s\n\n", data); err != nil {
				return
			}
			sub.advanceTo(p.Position, p.GlobalPosition)
		}
		sub.skip()
		if flusher != nil {
			flusher.Flush()
		}
		hold.release()
		if len(pokes) > 0 || more {
			continue
		}
		select {
		case <-changed:
		case <-recheck.C:
		case <-ctx.Done():
			return
		}
	}
}
