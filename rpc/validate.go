package rpc

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/node/nodeapi"
)

// Limits at the edge.
const (
	maxMessageBytes = 1 << 20  // data + metadata of one message
	maxRequestBytes = 16 << 20 // one request
)

// tooLarge says how an oversized message misses the limit, in the same
// words on both APIs.
func tooLarge(n int) string {
	return fmt.Sprintf("data and metadata are %d bytes, at most %d (1 MiB) per message", n, maxMessageBytes)
}

// asInvalid turns an fsm validation error into InvalidArgument with a
// field violation; other errors pass through.
func asInvalid(err error) error {
	var ve *fsm.ValidationError
	if errors.As(err, &ve) {
		return invalidField(ve.Field, "%s", ve.Reason)
	}
	return err
}

// newMessages converts the messages of an append as the client sent
// them (ids as given, metadata normalized); fsm.ValidateAppend and
// checkEdgeMessages check them.
func newMessages(in []*skaldv1.NewMessage) []*fsmv1.NewMessage {
	out := make([]*fsmv1.NewMessage, len(in))
	for i, m := range in {
		out[i] = &fsmv1.NewMessage{Id: m.Id, Type: m.Type, Data: m.Data, Metadata: fsm.NormalizeMetadata(m.Metadata),
			Tags: m.Tags}
	}
	return out
}

// checkEdgeMessages holds the messages of an append, the list path
// ("messages", "streams[2].messages"), to the rules of the API that apply
// does not hold entries to: an id, when given, is a UUID, and a message's
// data and metadata fit maxMessageBytes. in are the messages as sent, out
// as newMessages converted them; a client's id is set in out in canonical
// form. The caller has checked out with fsm first.
func checkEdgeMessages(path string, in []*skaldv1.NewMessage, out []*fsmv1.NewMessage) error {
	for i, m := range in {
		if m.Id != "" {
			id, ok := canonicalID(m.Id)
			if !ok {
				return invalidField(fmt.Sprintf("%s[%d].id", path, i), "must be a UUID")
			}
			out[i].Id, out[i].ClientId = id, true
		}
		// Invalid, not ResourceExhausted: retrying cannot help.
		if n := len(m.Data) + len(m.Metadata); n > maxMessageBytes {
			return invalidField(fmt.Sprintf("%s[%d].data", path, i), "%s", tooLarge(n))
		}
	}
	return nil
}

// canonicalID is a client's message id in the canonical lowercase form it
// is stored in; false when it is not a UUID.
func canonicalID(id string) (string, bool) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

func checkStream(field, stream string) error {
	return asInvalid(fsm.ValidateStreamName(field, stream))
}

// readLimit checks a read limit: 0 means the default, -1 unlimited.
func readLimit(limit int64) (int, error) {
	if limit < -1 || limit > fsm.MaxLimit {
		return 0, invalidField("limit", "must be -1 (unlimited), 0 (default) or 1..%d, got %d", fsm.MaxLimit, limit)
	}
	return int(limit), nil
}

func nonNegative(field string, v int64) error {
	if v < 0 {
		return invalidField(field, "must not be negative, got %d", v)
	}
	return nil
}

// readFrom checks a read's starting position: not negative, or -1 (from
// the end) when the read goes backward.
func readFrom(field string, v int64, backward bool) error {
	if backward {
		if v < -1 {
			return invalidField(field, "must be -1 (from the end) or more in a backward read, got %d", v)
		}
		return nil
	}
	return nonNegative(field, v)
}

// checkCategory rejects empty names and names with '-' (use ReadAll / all).
func checkCategory(field, category string) error {
	switch {
	case category == "":
		return invalidField(field, "must not be empty (read the whole namespace with ReadAll)")
	case strings.Contains(category, "-"):
		return invalidField(field, "must not contain '-': %q names a stream, not a category", category)
	}
	return asInvalid(fsm.ValidateStreamName(field, category))
}

// categoryFilters validates the filters a category read and a category
// subscription share: the correlation category and the consumer group
// (nil, or size 0 with member 0, means no group: member and size 0).
func categoryFilters(correlation string, g *skaldv1.ConsumerGroup) (member, size int64, err error) {
	if strings.Contains(correlation, "-") {
		return 0, 0, invalidField("correlation", "must be a category (no '-'), got %q", correlation)
	}
	if g == nil || (g.Size == 0 && g.Member == 0) {
		return 0, 0, nil
	}
	switch {
	case g.Size < 1:
		return 0, 0, invalidField("consumer_group.size", "must be at least 1, got %d", g.Size)
	case g.Member < 0 || g.Member >= g.Size:
		return 0, 0, invalidField("consumer_group.member", "must be 0..%d for size %d, got %d", g.Size-1, g.Size, g.Member)
	}
	return g.Member, g.Size, nil
}

// readOptions converts the API's read options.
func readOptions(o *skaldv1.ReadOptions) (nodeapi.ReadOptions, error) {
	if o == nil {
		return nodeapi.ReadOptions{Consistency: nodeapi.Linearizable}, nil
	}
	var out nodeapi.ReadOptions
	switch o.Consistency {
	case skaldv1.Consistency_CONSISTENCY_UNSPECIFIED, skaldv1.Consistency_CONSISTENCY_LINEARIZABLE:
		out.Consistency = nodeapi.Linearizable
	case skaldv1.Consistency_CONSISTENCY_SESSION:
		out.Consistency, out.MinIndex = nodeapi.Session, o.MinIndex
	case skaldv1.Consistency_CONSISTENCY_LOCAL:
		out.Consistency = nodeapi.Local
		if o.MaxStaleness != nil {
			if err := o.MaxStaleness.CheckValid(); err != nil || o.MaxStaleness.AsDuration() < 0 {
				return out, invalidField("read.max_staleness", "must be a non-negative duration")
			}
			out.MaxStaleness = o.MaxStaleness.AsDuration()
		}
	default:
		return out, invalidField("read.consistency", "unknown consistency %d", o.Consistency)
	}
	return out, nil
}

// queryOf converts and checks a query of the API; field is its path.
func queryOf(field string, q *skaldv1.Query) (*fsmv1.Query, error) {
	if q == nil {
		return nil, invalidField(field, "must be set")
	}
	out := queryProto(q)
	if err := fsm.ValidateQuery(field, fsm.QueryOf(out)); err != nil {
		return nil, asInvalid(err)
	}
	return out, nil
}

// queryProto converts a query of the API, unchecked; nil stays nil.
func queryProto(q *skaldv1.Query) *fsmv1.Query {
	if q == nil {
		return nil
	}
	out := &fsmv1.Query{Items: make([]*fsmv1.QueryItem, len(q.Items))}
	for i, it := range q.Items {
		out.Items[i] = &fsmv1.QueryItem{Types: it.Types, Tags: it.Tags}
	}
	return out
}

// conditionOf converts an append condition; nil stays nil. fsm checks
// it with the append (fsm.ValidateCondition); whether its position is in
// the future is decided in apply.
func conditionOf(c *skaldv1.AppendCondition) *fsmv1.AppendCondition {
	if c == nil {
		return nil
	}
	return &fsmv1.AppendCondition{FailIfEventsMatch: queryProto(c.FailIfEventsMatch), After: c.After}
}
