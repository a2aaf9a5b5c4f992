package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/internal/jsonscan"
)

const maxImportLine = 1 << 20

// maxImportChunkBytes also bounds a chunk (one Raft entry) by size: 1000
// records of up to 1 MiB each would make an entry too large to replicate
// comfortably.
const maxImportChunkBytes = 4 << 20

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

// importError is an in-band /import failure: the last event. Field, when
// set, names the record's field at fault (a Skald extension).
type importError struct {
	Code    string `json:"error"`
	Message string `json:"message"`
	Line    int    `json:"line"`
	Field   string `json:"field,omitempty"`
}

// parseImportLine decodes and checks one record; the error carries the
// code INVALID_JSON or INVALID_RECORD, the line and the field. Positions
// and global positions must be below 2^62 (fsm.MaxImportedPosition, so
// writes after the import have room), times within what Skald stores
// (fsm.ValidateTime), and the line UTF-8 text (strict.go).
func parseImportLine(line []byte, n int) (*fsmv1.ImportedMessage, *importError) {
	var rec importRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&rec); err != nil || dec.More() {
		return nil, &importError{"INVALID_JSON", fmt.Sprintf("line is not one JSON object: %v", err), n, ""}
	}
	// The line is valid JSON; encoding/json read any bad text in it as
	// U+FFFD.
	if !jsonscan.ValidText(line) {
		if ierr := importTextError(jsonscan.BadText(line), n); ierr != nil {
			return nil, ierr
		}
	}
	bad := func(field, format string, args ...any) (*fsmv1.ImportedMessage, *importError) {
		return nil, &importError{"INVALID_RECORD", fmt.Sprintf(format, args...), n, field}
	}
	refused := func(field string, err error) (*fsmv1.ImportedMessage, *importError) {
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
	case !isObject(rec.Data):
		return bad("data", "data must be an object")
	case len(rec.Meta) > 0 && !isNull(rec.Meta) && !isObject(rec.Meta):
		return bad("meta", "meta must be an object or null")
	}
	var tags []string
	if len(rec.Tags) > 0 && !isNull(rec.Tags) {
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
		Data: compactJSON(rec.Data), Metadata: fsm.NormalizeMetadata(compactJSON(rec.Meta)), TimeUnixNano: t.UnixNano(),
		Tags: tags,
	}, nil
}

// importHandler serves POST /import: NDJSON records replicated in chunks
// of at most 1000 (one Raft entry each), with SSE progress. A failing
// chunk is not applied; chunks before it stay. force=true clears the
// namespace first, in the same entry as the first chunk.
func (e *evdb) importHandler(w http.ResponseWriter, r *http.Request) {
	start, code := time.Now(), "ok" // the last event's error code, if any
	defer func() { e.metrics.observeCode(evdbPrefix+"import", code, start) }()
	if r.Method != http.MethodPost {
		code = evCodeLabel("INVALID_REQUEST")
		writeEvError(w, &evError{status: http.StatusMethodNotAllowed, code: "INVALID_REQUEST", message: "use POST"})
		return
	}
	ctx := r.Context()
	c, everr := e.authenticate(ctx, r)
	if everr == nil {
		everr = evPermit(c, evImportPath, nil)
	}
	if everr != nil {
		code = evCodeLabel(everr.code)
		writeEvError(w, everr)
		return
	}
	force := r.URL.Query().Get("force") == "true"
	// Progress events go out while the body is still read. On HTTP/1.1,
	// net/http otherwise discards up to 256 KiB of the unread body at the
	// first flush (a chunked body, or one with less than that left), and
	// the import ends mid-line. HTTP/2 is full duplex already and says
	// so with an error this ignores.
	_ = http.NewResponseController(w).EnableFullDuplex()
	// A full-duplex handler that returns before the body's end (an
	// import error) must close the body itself, or net/http may read the
	// next request while a body read is pending and panic
	// (golang/go#68560); the connection is then closed after the reply.
	defer r.Body.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	event := func(v any) {
		if ierr, ok := v.(*importError); ok {
			code = evCodeLabel(ierr.Code)
		}
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	var imported int64
	var (
		chunk []*fsmv1.ImportedMessage
		lines []int // line number of each record of the chunk
		size  int   // bytes of the chunk's records
		clear = force
	)
	flush := func() *importError {
		if len(chunk) == 0 && !clear {
			return nil
		}
		res, err := e.b.Import(ctx, &fsmv1.Import{Namespace: c.namespace, Messages: chunk, Clear: clear})
		if err != nil {
			var pe *fsm.PositionExistsError
			var ve *fsm.ValidationError
			switch {
			case errors.As(err, &pe):
				return &importError{"POSITION_EXISTS", pe.Describe(), lines[pe.Record], ""}
			case errors.As(err, &ve):
				line, msg := recordOf(ve, lines)
				return &importError{"INVALID_RECORD", msg, line, ""}
			}
			line := 0
			if len(lines) > 0 {
				line = lines[0]
			}
			return &importError{"IMPORT_FAILED", e.backendError(ctx, err).message, line, ""}
		}
		clear = false
		imported += res.GetImport().Imported
		if res.GetImport().Imported > 0 {
			event(map[string]any{"imported": imported, "gpos": res.GetImport().LastGlobalPosition})
		}
		chunk, lines, size = chunk[:0], lines[:0], 0
		return nil
	}
	body := &readErr{r: r.Body}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), maxImportLine)
	sc.Split(body.scanLines)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		rec, ierr := parseImportLine(line, n)
		if ierr != nil {
			event(ierr)
			return
		}
		chunk, lines, size = append(chunk, rec), append(lines, n), size+len(line)
		if len(chunk) == fsm.MaxImportMessages || size >= maxImportChunkBytes {
			if ierr := flush(); ierr != nil {
				event(ierr)
				return
			}
		}
	}
	if err := sc.Err(); err != nil {
		msg := err.Error()
		if errors.Is(err, bufio.ErrTooLong) {
			msg = fmt.Sprintf("line longer than %d bytes", maxImportLine)
		} else if errors.Is(err, io.ErrUnexpectedEOF) {
			msg = "request body ended early"
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			msg = fmt.Sprintf("request body too slow: less than 1 MiB arrived within the read timeout (%s)", e.limits.ReadTimeout)
		}
		event(&importError{"READ_ERROR", msg, n + 1, ""})
		return
	}
	if ierr := flush(); ierr != nil {
		event(ierr)
		return
	}
	event(map[string]any{"done": true, "imported": imported, "elapsed": time.Since(start).Round(time.Millisecond).String()})
}

// recordOf is the line of the record a chunk's validation error names
// (its field messages[i].f) and the error as that line's reader sees it:
// the record's field and the reason, not the chunk's index. An error of
// the chunk as a whole is its first line's.
func recordOf(ve *fsm.ValidationError, lines []int) (line int, msg string) {
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
