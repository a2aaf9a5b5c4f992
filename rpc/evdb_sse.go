package rpc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
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

// sseBadRequest answers an invalid /subscribe with 400 and a plain-text
// body, as EventoDB does.
func sseBadRequest(w http.ResponseWriter, format string, args ...any) {
	http.Error(w, fmt.Sprintf(format, args...), http.StatusBadRequest)
}

// parseSubscribe validates /subscribe's query: exactly one of stream,
// category and all=true; integer position, consumer and size; a consumer
// group needs size > 0 and consumer < size.
func parseSubscribe(r *http.Request) (*subscription, bool, string) {
	q := r.URL.Query()
	stream, category, all := q.Get("stream"), q.Get("category"), q.Get("all") == "true"
	n := 0
	for _, set := range []bool{stream != "", category != "", all} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, false, "exactly one of stream, category or all=true is required"
	}
	ints := map[string]int64{}
	for _, k := range []string{"position", "consumer", "size"} {
		if v := q.Get(k); v != "" {
			i, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, false, fmt.Sprintf("%s must be an integer", k)
			}
			ints[k] = i
		}
	}
	_, hasConsumer := ints["consumer"]
	_, hasSize := ints["size"]
	sub := &subscription{}
	if hasConsumer || hasSize {
		if ints["size"] <= 0 || ints["consumer"] < 0 || ints["consumer"] >= ints["size"] {
			return nil, false, "consumer must be 0..size-1 and size at least 1"
		}
		if category == "" {
			return nil, false, "consumer groups need a category subscription"
		}
		sub.member, sub.size = ints["consumer"], ints["size"]
	}
	pos := max(ints["position"], 0)
	switch {
	case stream != "":
		if fsm.ValidateStreamName("stream", stream) != nil {
			return nil, false, "stream must be 1..512 bytes of UTF-8 without NUL"
		}
		sub.stream, sub.next = stream, pos
	case category != "":
		sub.category, sub.next = category, max(pos, 1)
	default:
		sub.next = max(pos, 1)
	}
	return sub, all, ""
}

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
	sub, all, msg := parseSubscribe(r)
	if msg != "" {
		sseBadRequest(w, "%s", msg)
		return
	}
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
