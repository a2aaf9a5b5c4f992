package fsm

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Reads of positions: where the messages a read would return are, without
// their payloads (what a poke of EventoDB's /subscribe says). A stream's
// positions come from its index alone; a category's and the namespace's
// from their index or log keys and, for the stream position, the stored
// message's position field read in place: no message is decoded or copied
// (DecodedBytes does not move).

// Position is a message's place: its stream, stream position and global
// position.
type Position struct {
	Stream         string
	Position       int64
	GlobalPosition int64
}

// positionOverhead is what a position costs in a page beyond its stream
// name, as page.room counts it.
const positionOverhead = 32

// PositionsQuery selects the positions of messages in global order (or a
// stream's, in stream order).
type PositionsQuery struct {
	// Stream, when set, reads that stream's from stream position From;
	// else Category, when set, reads that category's, else the whole
	// namespace's, from global position From (below 1 means 1).
	Stream, Category string
	From             int64
	// Limit: 0 means DefaultLimit, negative means unlimited.
	Limit int
	// Member and Size select a consumer group member of a category read;
	// Size 0 means none.
	Member, Size int64
}

// ReadPositions returns the positions the matching read of messages
// (ReadStream, ReadCategory, ReadAll) would return, in its order, bounded
// like it: the page byte cap (each position counting its stream name), the
// scan budget (entries of other group members skipped: ScanStopped then
// says where to read on) and the view's context. PageCapped reports a
// stop at either.
func (v *View) ReadPositions(q PositionsQuery) ([]Position, error) {
	limit := normLimit(q.Limit)
	var lower, upper []byte
	switch {
	case q.Stream != "":
		lower, upper = streamKey(q.Stream, max(q.From, 0)), prefixEnd(streamPrefix(q.Stream))
	case q.Category != "":
		lower, upper = categoryKey(q.Category, max(q.From, 1)), prefixEnd(categoryPrefix(q.Category))
	default:
		lower, upper = messageKey(max(q.From, 1)), prefixEnd(prefixMessage)
	}
	it, err := v.iter(lower, upper)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	p := v.startPage(limit)
	var out []Position
	for ok := it.First(); ok && !p.full() && (limit < 0 || len(out) < limit); ok = it.Next() {
		var pos Position
		switch {
		case q.Stream != "":
			gp, err := decodeUint64(it.Value())
			if err != nil {
				return nil, err
			}
			pos = Position{Stream: q.Stream, Position: keySuffixUint64(it.Key()), GlobalPosition: gp}
		case q.Category != "":
			gp := keySuffixUint64(it.Key())
			flags, hash, stream, _, err := decodeCatEntry(it.Value())
			if err != nil {
				return nil, err
			}
			if q.Size > 0 && (flags&1 == 0 || groupMember(hash, q.Size) != q.Member) {
				p.skip(gp + 1)
				continue
			}
			at, err := v.positionAt(gp)
			if err != nil {
				return nil, err
			}
			pos = Position{Stream: string(stream), Position: at, GlobalPosition: gp}
		default:
			gp := keySuffixUint64(it.Key())
			val, err := it.ValueAndErr()
			if err != nil {
				return nil, err
			}
			stream, at, ok := peekPosition(val)
			if !ok {
				return nil, fmt.Errorf("fsm: message %d: does not decode: %w", gp, errCorruptValue)
			}
			pos = Position{Stream: string(stream), Position: at, GlobalPosition: gp}
		}
		if p.look(); !p.room(positionOverhead + len(pos.Stream)) {
			break
		}
		out = append(out, pos)
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	v.capped, v.stopped, v.resume, v.lastBytes = p.capped, p.stopped, p.resume, p.bytes
	if p.err != nil {
		return nil, p.err
	}
	return out, nil
}

// positionAt is the stream position of the message at gp, read in place:
// that message is indexed, so its absence is corruption.
func (v *View) positionAt(gp int64) (int64, error) {
	if v.mit == nil {
		it, err := v.iter(prefixMessage, prefixEnd(prefixMessage))
		if err != nil {
			return 0, err
		}
		v.mit = it
	}
	v.mgp = 0 // lookupMessage must seek next time
	key := messageKey(gp)
	if !v.mit.SeekGE(key) || string(v.mit.Key()) != string(key) {
		if err := v.mit.Error(); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("fsm: namespace %q: message %d is indexed but missing: %w", v.ns.rec.Name, gp, errCorruptValue)
	}
	val, err := v.mit.ValueAndErr()
	if err != nil {
		return 0, err
	}
	_, at, ok := peekPosition(val)
	if !ok {
		return 0, fmt.Errorf("fsm: message %d: does not decode: %w", gp, errCorruptValue)
	}
	return at, nil
}

// peekPosition returns a stored message's stream (a slice of val) and
// stream position without decoding the rest, as decodeMessage would read
// them (a field given twice keeps its last value).
func peekPosition(val []byte) (stream []byte, pos int64, ok bool) {
	for buf := val; len(buf) > 0; {
		num, wt, n := protowire.ConsumeTag(buf)
		if n < 0 {
			return nil, 0, false
		}
		buf = buf[n:]
		switch {
		case wt == protowire.BytesType && num == smStream:
			v, n := protowire.ConsumeBytes(buf)
			if n < 0 {
				return nil, 0, false
			}
			stream, buf = v, buf[n:]
		case wt == protowire.VarintType && num == smPosition:
			v, n := protowire.ConsumeVarint(buf)
			if n < 0 {
				return nil, 0, false
			}
			pos, buf = int64(v), buf[n:]
		default:
			n := protowire.ConsumeFieldValue(num, wt, buf)
			if n < 0 {
				return nil, 0, false
			}
			buf = buf[n:]
		}
	}
	return stream, pos, true
}
