package evdb

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/skalddb/skald/fsm"
)

// FuzzImportLine feeds arbitrary lines to the NDJSON record parser: no
// panic, and anything it accepts is a record the state machine accepts
// under the strict input rules, with its text as sent (nothing read as
// U+FFFD that the line did not hold).
//
//	go test -run '^$' -fuzz FuzzImportLine -fuzztime 60s ./rpc/evdb
func FuzzImportLine(f *testing.F) {
	for _, seed := range []string{
		`{"id":"i","stream":"order-1","type":"Created","pos":0,"gpos":47,"data":{"a":1},"meta":null,` +
			`"time":"2025-01-15T10:00:00Z"}`,
		`{"id":"i","stream":"order-1","type":"T","pos":3,"gpos":1,"data":{},"meta":{"k":"v"},` +
			`"time":"2025-01-15T10:00:00.123456789Z"}`,
		`{"id":"i","stream":"","type":"T","pos":0,"gpos":1,"data":{},"time":"x"}`, `{`, `[]`, `null`, `{"pos":-1}`,
		`{"id":"i","stream":"s-1","type":"T","pos":4611686018427387903,"gpos":4611686018427387904,"data":{},` +
			`"time":"9999-12-31T00:00:00Z"}`,
		"{\"id\":\"i\",\"stream\":\"s-\xff\",\"type\":\"T\\ud800\",\"pos\":0,\"gpos\":1,\"data\":{\"\xc3\":1}," +
			"\"time\":\"2025-01-15T10:00:00Z\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, ierr := ParseImportLine(line, 1)
		if (rec == nil) == (ierr == nil) {
			t.Fatalf("line %q: record %v and error %v", line, rec, ierr)
		}
		if rec == nil {
			return
		}
		if fsm.ValidateStreamName("s", rec.Stream) != nil || fsm.ValidateTypeName("t", rec.Type) != nil ||
			!utf8.ValidString(rec.Id) || rec.Id == "" ||
			fsm.ValidateImportedPosition("p", rec.Position, 0) != nil ||
			fsm.ValidateImportedPosition("g", rec.GlobalPosition, 1) != nil ||
			fsm.ValidateData("d", rec.Data) != nil || fsm.ValidateMetadata("m", rec.Metadata) != nil ||
			fsm.ValidateTime("t", time.Unix(0, rec.TimeUnixNano)) != nil {
			t.Fatalf("line %q accepted as invalid record %v", line, rec)
		}
		if !bytes.Contains(line, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(line), []byte(`\ufffd`)) &&
			strings.ContainsRune(rec.Id+rec.Stream+rec.Type, utf8.RuneError) {
			t.Fatalf("line %q accepted with text read as U+FFFD: %v", line, rec)
		}
	})
}

// TestImportRecordOf: an import chunk's validation error is answered at
// the line of the record it names, in that record's words.
func TestImportRecordOf(t *testing.T) {
	lines := []int{3, 4, 7}
	for _, tc := range []struct {
		field, reason string
		line          int
		msg           string
	}{
		{"messages[2].data", "must be a JSON object", 7, "data: must be a JSON object"},
		{"messages[0]", "is empty", 3, "is empty"},
		{"messages", "must hold at most 1000 records, got 1001", 3,
			"invalid messages: must hold at most 1000 records, got 1001"},
		{"messages[9].data", "out of range", 3, "invalid messages[9].data: out of range"},
	} {
		line, msg := RecordOf(&fsm.ValidationError{Field: tc.field, Reason: tc.reason}, lines)
		if line != tc.line || msg != tc.msg {
			t.Errorf("RecordOf(%s) = %d, %q; want %d, %q", tc.field, line, msg, tc.line, tc.msg)
		}
	}
}
