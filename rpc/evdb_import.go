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
	"time"

	"github.com/skalddb/skald/fsm"
	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
	"github.com/skalddb/skald/rpc/evdb"
)

// maxImportChunkBytes also bounds a chunk (one Raft entry) by size: 1000
// records of up to 1 MiB each would make an entry too large to replicate
// comfortably.
const maxImportChunkBytes = 4 << 20

// importHandler serves POST /import: NDJSON records replicated in chunks
// of at most 1000 (one Raft entry each), with SSE progress. A failing
// chunk is not applied; chunks before it stay. force=true clears the
// namespace first, in the same entry as the first chunk.
func (e *eventodb) importHandler(w http.ResponseWriter, r *http.Request) {
	start, code := time.Now(), "ok" // the last event's error code, if any
	defer func() { e.metrics.observeCode(evdbPrefix+"import", code, start) }()
	if r.Method != http.MethodPost {
		code = evCodeLabel("INVALID_REQUEST")
		evdb.WriteError(w, &evdb.Error{Status: http.StatusMethodNotAllowed, Code: "INVALID_REQUEST", Message: "use POST"})
		return
	}
	ctx := r.Context()
	c, everr := e.authenticate(ctx, r)
	if everr == nil {
		everr = evPermit(c, evImportPath, nil)
	}
	if everr != nil {
		code = evCodeLabel(everr.Code)
		evdb.WriteError(w, everr)
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
		if ierr, ok := v.(*evdb.ImportError); ok {
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
	flush := func() *evdb.ImportError {
		if len(chunk) == 0 && !clear {
			return nil
		}
		res, err := e.b.Import(ctx, &fsmv1.Import{Namespace: c.namespace, Messages: chunk, Clear: clear})
		if err != nil {
			var pe *fsm.PositionExistsError
			var ve *fsm.ValidationError
			switch {
			case errors.As(err, &pe):
				return &evdb.ImportError{Code: "POSITION_EXISTS", Message: pe.Describe(), Line: lines[pe.Record]}
			case errors.As(err, &ve):
				line, msg := evdb.RecordOf(ve, lines)
				return &evdb.ImportError{Code: "INVALID_RECORD", Message: msg, Line: line}
			}
			line := 0
			if len(lines) > 0 {
				line = lines[0]
			}
			return &evdb.ImportError{Code: "IMPORT_FAILED", Message: e.backendError(ctx, err).Message, Line: line}
		}
		clear = false
		imported += res.GetImport().Imported
		if res.GetImport().Imported > 0 {
			event(map[string]any{"imported": imported, "gpos": res.GetImport().LastGlobalPosition})
		}
		chunk, lines, size = chunk[:0], lines[:0], 0
		return nil
	}
	sc := evdb.NewImportScanner(r.Body)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		rec, ierr := evdb.ParseImportLine(line, n)
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
			msg = fmt.Sprintf("line longer than %d bytes", evdb.MaxImportLine)
		} else if errors.Is(err, io.ErrUnexpectedEOF) {
			msg = "request body ended early"
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			msg = fmt.Sprintf("request body too slow: less than 1 MiB arrived within the read timeout (%s)", e.limits.ReadTimeout)
		}
		event(&evdb.ImportError{Code: "READ_ERROR", Message: msg, Line: n + 1})
		return
	}
	if ierr := flush(); ierr != nil {
		event(ierr)
		return
	}
	event(map[string]any{"done": true, "imported": imported, "elapsed": time.Since(start).Round(time.Millisecond).String()})
}
