package delivery

import (
	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// readSource reads up to n messages of source from global position from
// on (and up to v's page byte cap), and returns the position to read from
// next: past the last message read, or the head of the namespace when the
// page came up short of n without reaching the cap (nothing of the source
// lies below it unread). A query source sees only tagged
// messages (the only ones indexed); its after is exclusive, hence from-1.
//
// A stream source is read from stream position streamPos (every message
// of the stream below it lies below from) and the position the next read
// starts at is returned: past the last message read, where the same holds
// for the next from.
func readSource(v *fsm.View, src *fsmv1.GroupSource, from, streamPos int64, n int,
) ([]fsm.Message, int64, int64, error) {
	var msgs []fsm.Message
	var err error
	switch {
	case src.GetStream() != "":
		msgs, err = v.ReadStream(fsm.StreamQuery{Stream: src.Stream, Position: streamPos, GlobalPosition: from, Limit: n})
		if err == nil && len(msgs) > 0 {
			streamPos = msgs[len(msgs)-1].Position + 1
		}
	case src.GetCategory() != "":
		msgs, err = v.ReadCategory(fsm.CategoryQuery{Category: src.Category, GlobalPosition: from, Limit: n})
	case src.GetQuery() != nil:
		msgs, err = v.Query(fsm.QueryOf(src.Query), from-1, n)
	default:
		msgs, err = v.ReadAll(from, n)
	}
	if err != nil {
		return nil, from, streamPos, err
	}
	next := from
	if len(msgs) > 0 {
		next = msgs[len(msgs)-1].GlobalPosition + 1
	}
	if len(msgs) < n && !v.PageCapped() {
		head, err := v.NextGlobalPosition()
		if err != nil {
			return nil, from, streamPos, err
		}
		next = max(next, head)
	}
	return msgs, next, streamPos, nil
}
