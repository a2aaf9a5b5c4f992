package evdb

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/jsonscan"
)

// MaxImportLine bounds one NDJSON line of /import.
const MaxImportLine = 1 << 20

// importRecord is one NDJSON line of an export. Tags is a Skald
// extension (EventoDB's import ignores fields it does not know); absent,
// null or [] means none.
type importRecord struct {
	ID     string          `json:"id"`
	Stream string          `json:"stream"`
	Type   string          `json:"type"`
	Pos    *int64          `json:"pos"`
	GPos   *int64          `json:"gpos"`
	Data   json.RawMessage `json:"data"`
	Meta   json.RawMessage `json:"meta"`
	Time   string          `json:"time"`
	Tags   json.RawMessage `json:"tags"`
}

// ImportError is an in-band /import failure: the last event. Field, when
// set, names the record's field at fault (a Skald extension).
type ImportError struct {
	Code    string `json:"error"`
	Message string `json:"message"`
	Line    int    `json:"line"`
	Field   string `json:"field,omitempty"`
}

// ParseImportLine decodes and checks record n; the error carries the
// code INVALID_JSON or INVALID_RECORD, the line and the field. Positions
// and global positions must be below 2^62 (fsm.MaxImportedPosition, so
// writes after the import have room), times within what Skald stores
// (fsm.ValidateTime), and the line UTF-8 text.
func ParseImportLine(line []byte, n int) (*fsmv1.ImportedMessage, *ImportError) {
	var rec importRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&rec); err != nil || dec.More() {
		return nil, &ImportError{"INVALID_JSON", fmt.Sprintf("line is not one JSON object: %v", err), n, ""}
	}
	// The line is valid JSON; encoding/json read any bad text in it as
	// U+FFFD.
	if !jsonscan.ValidText(line) {
		if ierr := importTextError(jsonscan.BadText(line), n); ierr != nil {
			return nil, ierr
		}
	}
	bad := func(field, format string, args ...any) (*fsmv1.ImportedMessage, *ImportError) {
		return nil, &ImportError{"INVALID_RECORD", fmt.Sprintf(format, args...), n, field}
	}
	refused := func(field string, err error) (*fsmv1.ImportedMessage, *ImportError) {
		var ve *fsm.ValidationError
		if errors.As(err, &ve) {
			return bad(field, "%s %s", field, ve.Reason)
		}
		return bad(field, "%s: %v", field, err)
	}
	t, err := time.Parse(time.RFC3339, rec.Time)
	if err != nil {
		return bad("time", "time %q is not RFC 3339", rec.Time)
	}
	if err := fsm.ValidateTime("time", t); err != nil {
		return refused("time", err)
	}
	switch {
	case rec.ID == "":
		return bad("id", "id is required")
	case fsm.ValidateStreamName("stream", rec.Stream) != nil:
		return bad("stream", "stream must be 1..512 bytes of UTF-8 without NUL")
	case fsm.ValidateTypeName("type", rec.Type) != nil:
		return bad("type", "type must be 1..256 bytes of UTF-8 without NUL")
	case rec.Pos == nil:
		return bad("pos", "pos is required")
	case rec.GPos == nil:
		return bad("gpos", "gpos is required")
	}
	if err := fsm.ValidateImportedPosition("pos", *rec.Pos, 0); err != nil {
		return refused("pos", err)
	}
	if err := fsm.ValidateImportedPosition("gpos", *rec.GPos, 1); err != nil {
		return refused("gpos", err)
	}
	switch {
	case !IsObject(rec.Data):
		return bad("data", "data must be an object")
	case len(rec.Meta) > 0 && !IsNull(rec.Meta) && !IsObject(rec.Meta):
		return bad("meta", "meta must be an object or null")
	}
	var tags []string
	if len(rec.Tags) > 0 && !IsNull(rec.Tags) {
		if json.Unmarshal(rec.Tags, &tags) != nil {
			return bad("tags", "tags must be an array of strings or null")
		}
		if err := fsm.ValidateTags("tags", tags); err != nil {
			var ve *fsm.ValidationError
			if errors.As(err, &ve) {
				return bad("tags", "%s %s", ve.Field, ve.Reason)
			}
			return refused("tags", err)
		}
	}
	return &fsmv1.ImportedMessage{
		Id: rec.ID, Stream: rec.Stream, Type: rec.Type, Position: *rec.Pos, GlobalPosition: *rec.GPos,
		Data: CompactJSON(rec.Data), Metadata: fsm.NormalizeMetadata(CompactJSON(rec.Meta)), TimeUnixNano: t.UnixNano(),
		Tags: tags,
	}, nil
}

// importTextError is the /import refusal of a line that is valid JSON but
// not text: INVALID_RECORD naming the record's field ("data", or "stream"
// and so on) and the path in it.
func importTextError(e *jsonscan.TextError, line int) *ImportError {
	if e == nil {
		return nil
	}
	path := strings.TrimPrefix(e.Path, ".")
	field, rest, _ := strings.Cut(path, ".")
	if i := strings.IndexByte(field, '['); i > 0 {
		field, rest = field[:i], strings.TrimPrefix(path[i:], ".")
	}
	where := ""
	switch {
	case field == "":
		field = "record"
	case e.InName && rest == "":
		where = " in a member name"
	case e.InName:
		where = " in the member name " + rest
	case rest != "":
		where = " at " + rest
	}
	return &ImportError{Code: "INVALID_RECORD", Line: line, Field: field,
		Message: fmt.Sprintf("%s is not UTF-8 text%s: %s (byte %d of the line)", field, where, e.Reason, e.Offset)}
}

// RecordOf is the line of the record a chunk's validation error names
// (its field messages[i].f) and the error as that line's reader sees it:
// the record's field and the reason, not the chunk's index. An error of
// the chunk as a whole is its first line's.
func RecordOf(ve *fsm.ValidationError, lines []int) (line int, msg string) {
	rest, ok := strings.CutPrefix(ve.Field, "messages[")
	idx, field, ok2 := strings.Cut(rest, "]")
	i, err := strconv.Atoi(idx)
	if !ok || !ok2 || err != nil || i < 0 || i >= len(lines) {
		if len(lines) == 0 {
			return 0, ve.Describe()
		}
		return lines[0], ve.Describe()
	}
	if field = strings.TrimPrefix(field, "."); field == "" {
		return lines[i], ve.Reason
	}
	return lines[i], field + ": " + ve.Reason
}

// NewImportScanner returns the scanner of /import's lines from body: lines
// up to MaxImportLine, and a line cut off by a read error other than
// io.EOF is not a line but that error (Err).
func NewImportScanner(body io.Reader) *bufio.Scanner {
	r := &readErr{r: body}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxImportLine)
	sc.Split(r.scanLines)
	return sc
}

// readErr remembers the error that ended a body other than io.EOF, so
// that scanLines can tell a line the body was cut in from a last line
// without its newline.
type readErr struct {
	r   io.Reader
	err error
}

func (b *readErr) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// scanLines is bufio.ScanLines, except that the piece of a line a read
// error cut off is not a line: bufio.Scanner hands a split function what
// it holds when a read fails as if the body had ended, and the import
// would report the half line as INVALID_JSON instead of the read error.
func (b *readErr) scanLines(data []byte, atEOF bool) (int, []byte, error) {
	if atEOF && b.err != nil && len(data) > 0 && bytes.IndexByte(data, '\n') < 0 {
		return 0, nil, b.err
	}
	return bufio.ScanLines(data, atEOF)
}
