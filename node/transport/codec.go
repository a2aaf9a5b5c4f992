package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
)

// The binary framing of skald-raft/2 (wire.go): AppendEntries, the one
// RPC a loaded cluster sends per batch, written field by field instead of
// through go-msgpack's reflection.
//
// A frame is a 4-byte big-endian length and that many bytes of body. A
// request body starts with its kind (frameAppendEntries, the only one),
// then the request; a response body is the answer to the request before
// it on the same connection. Integers are varints (encoding/binary);
// a byte string is uvarint(len+1) then its bytes, 0 meaning nil, so nil
// and empty survive the trip as they are; a time is a presence byte then
// varint nanoseconds since 1970.
//
//	request:  kind, ProtocolVersion, ID, Addr, Term, Leader, PrevLogEntry,
//	          PrevLogTerm, LeaderCommitIndex, count, count × entry
//	entry:    Index, Term, Type (one byte), Data, Extensions, AppendedAt
//	response: Error (nil when none), ProtocolVersion, ID, Addr, Term,
//	          LastLog, flags (1 Success, 2 NoRetryBackoff)
//
// INVARIANT: decoding a request allocates the entries' bytes once, in the
// frame's own buffer, which Raft then owns (its log cache keeps the
// entries): a frame buffer is never reused after its request is decoded.
const (
	frameHeaderBytes = 4
	// maxFrameBytes bounds one frame: 64 entries (Raft's MaxAppendEntries)
	// of the largest request the API takes (16 MiB) fit.
	maxFrameBytes = 1 << 30

	frameAppendEntries byte = 1

	respSuccess        byte = 1
	respNoRetryBackoff byte = 2

	// minEntryBytes is the fewest bytes an encoded entry takes: it bounds
	// a decoded count before anything is allocated for it.
	minEntryBytes = 6
)

// errFrameCorrupt is wrapped by every decoding error of a malformed frame.
var errFrameCorrupt = errors.New("node: malformed skald-raft/2 frame")

// appendFrameHeader reserves the length of a frame at the end of b; see
// finishFrame.
func appendFrameHeader(b []byte) []byte { return append(b, 0, 0, 0, 0) }

// finishFrame writes the body length of the frame that starts at
// b[start] into its header.
func finishFrame(b []byte, start int) ([]byte, error) {
	n := len(b) - start - frameHeaderBytes
	if n > maxFrameBytes {
		return nil, fmt.Errorf("node: skald-raft/2 frame of %d bytes is over the %d-byte limit", n, maxFrameBytes)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	return b, nil
}

// appendAppendEntriesRequest appends req as one frame to b.
func appendAppendEntriesRequest(b []byte, req *raft.AppendEntriesRequest) ([]byte, error) {
	start := len(b)
	b = appendFrameHeader(b)
	b = append(b, frameAppendEntries)
	b = binary.AppendVarint(b, int64(req.ProtocolVersion))
	b = appendBytes(b, req.ID)
	b = appendBytes(b, req.Addr)
	b = binary.AppendUvarint(b, req.Term)
	b = appendBytes(b, req.Leader)
	b = binary.AppendUvarint(b, req.PrevLogEntry)
	b = binary.AppendUvarint(b, req.PrevLogTerm)
	b = binary.AppendUvarint(b, req.LeaderCommitIndex)
	b = binary.AppendUvarint(b, uint64(len(req.Entries)))
	for _, e := range req.Entries {
		b = binary.AppendUvarint(b, e.Index)
		b = binary.AppendUvarint(b, e.Term)
		b = append(b, byte(e.Type))
		b = appendBytes(b, e.Data)
		b = appendBytes(b, e.Extensions)
		b = appendTime(b, e.AppendedAt)
	}
	return finishFrame(b, start)
}

// decodeAppendEntriesRequest decodes the body of a request frame. The
// entries' Data and Extensions alias body (see the INVARIANT above).
func decodeAppendEntriesRequest(body []byte) (*raft.AppendEntriesRequest, error) {
	d := frameDecoder{b: body}
	if kind := d.byte(); d.err == nil && kind != frameAppendEntries {
		return nil, fmt.Errorf("%w: request kind %d, want %d (AppendEntries)",
			errFrameCorrupt, kind, frameAppendEntries)
	}
	req := &raft.AppendEntriesRequest{}
	req.ProtocolVersion = raft.ProtocolVersion(d.varint())
	req.ID = d.bytes()
	req.Addr = d.bytes()
	req.Term = d.uvarint()
	req.Leader = d.bytes()
	req.PrevLogEntry = d.uvarint()
	req.PrevLogTerm = d.uvarint()
	req.LeaderCommitIndex = d.uvarint()
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)/minEntryBytes) {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", errFrameCorrupt, n, len(d.b))
	}
	if n > 0 && d.err == nil {
		logs := make([]raft.Log, n)
		req.Entries = make([]*raft.Log, n)
		for i := range logs {
			l := &logs[i]
			l.Index = d.uvarint()
			l.Term = d.uvarint()
			l.Type = raft.LogType(d.byte())
			l.Data = d.bytes()
			l.Extensions = d.bytes()
			l.AppendedAt = d.time()
			req.Entries[i] = l
		}
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("AppendEntries request: %w", err)
	}
	return req, nil
}

// appendAppendEntriesResponse appends the answer to a request as one
// frame to b: the error Raft answered with (nil when none) and resp.
func appendAppendEntriesResponse(b []byte, resp *raft.AppendEntriesResponse, rpcErr error) ([]byte, error) {
	start := len(b)
	b = appendFrameHeader(b)
	if rpcErr != nil {
		b = appendBytes(b, []byte(rpcErr.Error()))
	} else {
		b = appendBytes(b, nil)
	}
	b = binary.AppendVarint(b, int64(resp.ProtocolVersion))
	b = appendBytes(b, resp.ID)
	b = appendBytes(b, resp.Addr)
	b = binary.AppendUvarint(b, resp.Term)
	b = binary.AppendUvarint(b, resp.LastLog)
	var flags byte
	if resp.Success {
		flags |= respSuccess
	}
	if resp.NoRetryBackoff {
		flags |= respNoRetryBackoff
	}
	b = append(b, flags)
	return finishFrame(b, start)
}

// decodeAppendEntriesResponse decodes a response body into resp. The
// error Raft answered with, if any, is returned as remote (as
// hashicorp/raft's transport does: a plain error with its text); err is
// for a malformed frame.
func decodeAppendEntriesResponse(body []byte, resp *raft.AppendEntriesResponse) (remote, err error) {
	d := frameDecoder{b: body}
	msg := d.bytes()
	resp.ProtocolVersion = raft.ProtocolVersion(d.varint())
	resp.ID = d.bytes()
	resp.Addr = d.bytes()
	resp.Term = d.uvarint()
	resp.LastLog = d.uvarint()
	flags := d.byte()
	resp.Success = flags&respSuccess != 0
	resp.NoRetryBackoff = flags&respNoRetryBackoff != 0
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("AppendEntries response: %w", err)
	}
	if msg != nil {
		return errors.New(string(msg)), nil
	}
	return nil, nil
}

// readFrame reads one frame from r into a new buffer of exactly its body
// length (the buffer is handed on, never reused: see the INVARIANT).
func readFrame(r io.Reader, hdr *[frameHeaderBytes]byte) ([]byte, error) {
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrameBytes {
		return nil, fmt.Errorf("%w: a frame of %d bytes is over the %d-byte limit", errFrameCorrupt, n, maxFrameBytes)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

func appendBytes(b, p []byte) []byte {
	if p == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(p))+1)
	return append(b, p...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	return binary.AppendVarint(append(b, 1), t.UnixNano())
}

// frameDecoder reads a frame body; the first error sticks and every later
// read returns a zero value.
type frameDecoder struct {
	b   []byte
	err error
}

func (d *frameDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errFrameCorrupt, what)
	}
	d.b = nil
}

func (d *frameDecoder) byte() byte {
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *frameDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad unsigned varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint reads what binary.AppendVarint wrote: a zig-zag uvarint.
func (d *frameDecoder) varint() int64 {
	ux := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

// bytes returns the next byte string, aliasing the body; its capacity
// is its length, so an append by its owner never writes over the next
// field.
func (d *frameDecoder) bytes() []byte {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	n--
	if n > uint64(len(d.b)) {
		d.fail(fmt.Sprintf("a %d-byte string with %d bytes left", n, len(d.b)))
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *frameDecoder) time() time.Time {
	switch d.byte() {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(0, d.varint())
	}
	d.fail("bad time")
	return time.Time{}
}

// done reports the first error, or trailing bytes.
func (d *frameDecoder) done() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last field", errFrameCorrupt, len(d.b))
	}
	return nil
}
