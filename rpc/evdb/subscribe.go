package evdb

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/skalddb/skald/fsm"
)

// Subscription is a valid query of GET /subscribe: one stream, one
// category (with a consumer group's member and size, size 0 for none),
// or every stream (All), and where to start: the stream position for a
// stream, a global position of at least 1 otherwise.
type Subscription struct {
	Stream, Category string
	All              bool
	Next             int64
	Member, Size     int64
}

// SubscribeBadRequest answers an invalid /subscribe with 400 and a
// plain-text body, as EventoDB does.
func SubscribeBadRequest(w http.ResponseWriter, format string, args ...any) {
	http.Error(w, fmt.Sprintf(format, args...), http.StatusBadRequest)
}

// ParseSubscribe validates /subscribe's query: exactly one of stream,
// category and all=true; integer position, consumer and size; a consumer
// group needs size > 0 and consumer < size. A query refused is the
// message of its 400.
func ParseSubscribe(r *http.Request) (Subscription, string) {
	q := r.URL.Query()
	stream, category, all := q.Get("stream"), q.Get("category"), q.Get("all") == "true"
	n := 0
	for _, set := range []bool{stream != "", category != "", all} {
		if set {
			n++
		}
	}
	if n != 1 {
		return Subscription{}, "exactly one of stream, category or all=true is required"
	}
	ints := map[string]int64{}
	for _, k := range []string{"position", "consumer", "size"} {
		if v := q.Get(k); v != "" {
			i, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return Subscription{}, fmt.Sprintf("%s must be an integer", k)
			}
			ints[k] = i
		}
	}
	_, hasConsumer := ints["consumer"]
	_, hasSize := ints["size"]
	var sub Subscription
	if hasConsumer || hasSize {
		if ints["size"] <= 0 || ints["consumer"] < 0 || ints["consumer"] >= ints["size"] {
			return Subscription{}, "consumer must be 0..size-1 and size at least 1"
		}
		if category == "" {
			return Subscription{}, "consumer groups need a category subscription"
		}
		sub.Member, sub.Size = ints["consumer"], ints["size"]
	}
	pos := max(ints["position"], 0)
	switch {
	case stream != "":
		if fsm.ValidateStreamName("stream", stream) != nil {
			return Subscription{}, "stream must be 1..512 bytes of UTF-8 without NUL"
		}
		sub.Stream, sub.Next = stream, pos
	case category != "":
		sub.Category, sub.Next = category, max(pos, 1)
	default:
		sub.Next = max(pos, 1)
	}
	sub.All = all
	return sub, ""
}
