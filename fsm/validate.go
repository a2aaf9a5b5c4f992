package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skalddb/skald/internal/jsonscan"
)

// Input rules (Command.input_rules): the rules a proposer checked a
// command against at its API edge, and apply holds its entry to. Entries
// are replayed by future binaries and applied by replicas of different
// versions, so a rule that refuses more is never applied to an entry
// proposed without it: each rule set has a number, a node stamps the
// number its edge checked (Node.Apply), and apply checks every rule up to
// the entry's number.
const (
	// InputRulesLegacy is the number of entries written before the rules
	// were numbered: data and metadata are whatever encoding/json.Valid
	// accepts, imported positions any int64 from 0, namespace names any
	// of the name characters.
	InputRulesLegacy uint32 = 0
	// InputRulesStrict adds (issue 28): data and metadata are UTF-8 text
	// (jsonscan.ValidText), imported positions and global positions are
	// at most MaxImportedPosition, and a new namespace's name passes
	// ValidateNewNamespaceName.
	InputRulesStrict uint32 = 1
	// InputRulesDeletedMulti adds (issue 31): an AppendMulti naming a
	// hard-deleted stream is refused, as an Append to it always was.
	// Binaries before it wrote such a call.
	InputRulesDeletedMulti uint32 = 2
	// InputRules is the rule set this binary's API edges check.
	InputRules = InputRulesDeletedMulti
)

// Positions. Whatever an entry's rules, apply never stores a position or
// global position above MaxPosition, so position+1 never wraps anywhere
// (INVARIANT, checked in apply: an append or import that would pass it
// is refused).
const (
	// MaxPosition is the largest position or global position stored.
	MaxPosition = math.MaxInt64 - 1
	// MaxImportedPosition is the largest position or global position an
	// import may give (strict rules): below 2^62, so at least 2^62 writes
	// of a stream and of the namespace still fit after any import.
	MaxImportedPosition = 1<<62 - 1
)

// Times are stored as int64 nanoseconds since 1970 (UTC): the range is
// 1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z.
var (
	minTime = time.Unix(0, math.MinInt64).UTC()
	maxTime = time.Unix(0, math.MaxInt64).UTC()
)

// ValidateTime checks that t is a time Skald can store (int64 nanoseconds
// since 1970); t.UnixNano() of any other time wraps silently.
func ValidateTime(field string, t time.Time) error {
	if t.Before(minTime) || t.After(maxTime) {
		return invalid(field, "%s is outside the times Skald stores (int64 nanoseconds since 1970): %s to %s",
			t.UTC().Format(time.RFC3339Nano), minTime.Format(time.RFC3339Nano), maxTime.Format(time.RFC3339Nano))
	}
	return nil
}

// ValidateImportedPosition checks a position (or, with min 1, a global
// position) an import gives: min..MaxImportedPosition.
func ValidateImportedPosition(field string, p, min int64) error {
	if p < min || p > MaxImportedPosition {
		return invalid(field, "must be %d..%d (2^62 - 1: room is left for writes after the import), got %d", min, int64(MaxImportedPosition), p)
	}
	return nil
}

// Limits of the data model (DESIGN §2).
const (
	MaxNamespaceName = 128
	MaxStreamName    = 512
	MaxTypeName      = 256
	// MaxAppendMessages is the most messages one Append (one log entry) holds.
	MaxAppendMessages = 1000
	// MaxImportMessages is the most records one Import entry holds.
	MaxImportMessages = 1000
)

// ValidateNamespaceName checks a namespace name: 1..128 ASCII letters,
// digits, '-', '_' or '.'.
func ValidateNamespaceName(name string) error {
	if name == "" || len(name) > MaxNamespaceName {
		return invalid("name", "must be 1..%d characters, got %d", MaxNamespaceName, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return invalid("name", "character %s at %d is not a letter, digit, '-', '_' or '.'",
				quoteCharAt(name, i), i)
		}
	}
	return nil
}

// ValidateNewNamespaceName checks the name of a namespace to create: the
// character rule of ValidateNamespaceName, and a name no directory
// layout or tool can misread. Namespace databases live in directories
// named by internal id, never by name (DESIGN.md), so this guards what
// may yet map names to files (exports, backups, operators' scripts) and
// keeps names that look like paths or flags out:
//
//   - it starts with a letter or a digit: not ".", "..", a hidden file
//     (".x"), a name of Skald's own ("_metadata": a leading '_' is
//     reserved), or a flag ("-x");
//   - it does not end with '.' (Windows drops trailing dots: "a." is "a");
//   - its part before the first '.' is not a Windows device name, in any
//     case: CON, PRN, AUX, NUL, COM0..COM9, LPT0..LPT9 ("nul.txt" is the
//     device too).
//
// Existing namespaces keep their names: only creation checks this.
func ValidateNewNamespaceName(name string) error {
	if err := ValidateNamespaceName(name); err != nil {
		return err
	}
	if c := name[0]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
		return invalid("name", "must start with a letter or a digit (%s: names starting with '.' read as hidden or relative paths, '_' is reserved for Skald's own, '-' reads as a flag), got %q", quoteCharAt(name, 0), name)
	}
	if name[len(name)-1] == '.' {
		return invalid("name", "must not end with '.' (Windows drops trailing dots), got %q", name)
	}
	base, _, _ := strings.Cut(name, ".")
	if isDeviceName(base) {
		return invalid("name", "%q is a Windows device name (CON, PRN, AUX, NUL, COM0-9, LPT0-9, in any case and with any extension), got %q", base, name)
	}
	return nil
}

// quoteCharAt quotes the character of s that starts at byte i: the whole
// UTF-8 sequence when one starts there, so that an error names "😀", not
// its first byte read as Latin-1; a byte that starts no valid sequence is
// quoted as a byte ('\xff').
func quoteCharAt(s string, i int) string {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("%q", s[i:i+1])
	}
	return strconv.QuoteRune(r)
}

// isDeviceName reports whether s is a reserved Windows device name.
func isDeviceName(s string) bool {
	switch strings.ToUpper(s) {
	case "CON", "PRN", "AUX", "NUL":
		return true
	}
	if len(s) == 4 && s[3] >= '0' && s[3] <= '9' {
		switch strings.ToUpper(s[:3]) {
		case "COM", "LPT":
			return true
		}
	}
	return false
}

// ValidateStreamName checks a stream name: 1..512 bytes of UTF-8 without NUL.
func ValidateStreamName(field, stream string) error {
	return validateName(field, stream, MaxStreamName)
}

// ValidateTypeName checks a message type: 1..256 bytes of UTF-8 without NUL.
func ValidateTypeName(field, typ string) error {
	return validateName(field, typ, MaxTypeName)
}

func validateName(field, s string, max int) error {
	switch {
	case s == "":
		return invalid(field, "must not be empty")
	case len(s) > max:
		return invalid(field, "must be at most %d bytes, got %d", max, len(s))
	case strings.IndexByte(s, 0) >= 0:
		return invalid(field, "must not contain NUL")
	case !utf8.ValidString(s):
		return invalid(field, "must be valid UTF-8")
	}
	return nil
}

// ValidateData checks that data is a JSON object of UTF-8 text
// (jsonscan.ValidText): what the API edges accept.
func ValidateData(field string, data []byte) error {
	return checkObject(field, data, InputRules, "must be a JSON object")
}

// ValidateMetadata checks that metadata is empty, JSON null, or a JSON
// object of UTF-8 text.
func ValidateMetadata(field string, metadata []byte) error {
	if isNullJSON(metadata) {
		return nil
	}
	return checkObject(field, metadata, InputRules, "must be a JSON object or null")
}

// checkObject checks that b is a JSON object under the input rules:
// valid per encoding/json (legacy), and UTF-8 text (strict). Only the
// error path builds a message.
func checkObject(field string, b []byte, rules uint32, shape string) error {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return invalid(field, "%s", shape)
	}
	if rules < InputRulesStrict {
		if !jsonscan.Valid(t) {
			return invalid(field, "%s", shape)
		}
		return nil
	}
	if jsonscan.ValidText(t) {
		return nil
	}
	if !jsonscan.Valid(t) {
		return invalid(field, "%s", shape)
	}
	return invalid(field, "must be UTF-8 text: %s", describeText(jsonscan.BadText(t), len(b)-len(t)))
}

// describeText words where a JSON document fails the text rule; skipped
// is the whitespace trimmed before it.
func describeText(e *jsonscan.TextError, skipped int) string {
	if e == nil {
		return "not UTF-8 text"
	}
	where := "in a string"
	if e.InName {
		where = "in a member name"
	}
	if e.Path != "" {
		where += " at " + strings.TrimPrefix(e.Path, ".")
	}
	return fmt.Sprintf("%s %s (byte %d)", e.Reason, where, e.Offset+skipped)
}

// NormalizeMetadata maps JSON null (and blank) metadata to empty bytes.
func NormalizeMetadata(metadata []byte) []byte {
	if isNullJSON(metadata) {
		return nil
	}
	return metadata
}

func isNullJSON(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) == 0 || string(t) == "null"
}

// correlationKey is the metadata field naming a correlated stream.
const correlationKey = "correlationStreamName"

// correlationCategory returns the category of metadata's
// correlationStreamName when it is a string, else "". Keys match exactly
// (encoding/json's struct matching is case-insensitive, so a map is used).
func correlationCategory(metadata []byte) string {
	if len(metadata) == 0 || !bytes.Contains(metadata, []byte(correlationKey)) {
		return ""
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &m); err != nil {
		return ""
	}
	raw, ok := m[correlationKey]
	if !ok {
		return ""
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return ""
	}
	return Category(name)
}

// checkStreamRoom refuses to write n messages to a stream at version
// version when its last position would pass MaxPosition; field names the
// stream ("stream", "streams[2].stream").
func checkStreamRoom(field string, version int64, n int) error {
	if version > MaxPosition-int64(n) {
		return invalid(field, "is at version %d: %d more messages would pass the largest position %d", version, n, int64(MaxPosition))
	}
	return nil
}

// checkGlobalRoom refuses to write n messages at the namespace's next
// global position next when the last would pass MaxPosition.
func checkGlobalRoom(next int64, n int) error {
	if next > MaxPosition-int64(n)+1 {
		return invalid("messages", "the namespace's next global position is %d: %d more messages would pass the largest global position %d", next, n, int64(MaxPosition))
	}
	return nil
}
