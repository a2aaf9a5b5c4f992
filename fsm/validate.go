package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/skalddb/skald/internal/jsonscan"
)

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
			return invalid("name", "character %q at %d is not a letter, digit, '-', '_' or '.'", c, i)
		}
	}
	return nil
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

// ValidateData checks that data is a JSON object.
func ValidateData(field string, data []byte) error {
	if !isJSONObject(data) {
		return invalid(field, "must be a JSON object")
	}
	return nil
}

// ValidateMetadata checks that metadata is empty, JSON null, or a JSON object.
func ValidateMetadata(field string, metadata []byte) error {
	if isNullJSON(metadata) || isJSONObject(metadata) {
		return nil
	}
	return invalid(field, "must be a JSON object or null")
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

func isJSONObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && jsonscan.Valid(t)
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

// validateMessage checks one message of an append or import. Field paths
// are built only on failure: this runs for every message applied.
func validateMessage(i int, id, typ string, data, metadata []byte) error {
	var err error
	switch {
	case id == "":
		err = invalid("id", "must be set by the leader")
	case ValidateTypeName("type", typ) != nil:
		err = ValidateTypeName("type", typ)
	case !isJSONObject(data):
		err = invalid("data", "must be a JSON object")
	case !isNullJSON(metadata) && !isJSONObject(metadata):
		err = invalid("metadata", "must be a JSON object or null")
	default:
		return nil
	}
	ve := err.(*ValidationError)
	ve.Field = fmt.Sprintf("messages[%d].%s", i, ve.Field)
	return ve
}
