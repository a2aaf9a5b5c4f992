package fsm

import (
	"fmt"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// The checks of an append's shape, written once: apply holds every entry
// to them (under the entry's input rules), and the API edges call
// ValidateAppend and ValidateAppendMulti before they propose, so a client
// is refused with the field and reason apply would give. An edge adds
// only the rules of its own API (ids are UUIDs, a message's size), which
// apply does not hold entries to.

// ValidateAppend checks an Append as an API edge takes it, before the
// leader stamps it: apply's rules under InputRules, except that a message
// may still lack its id. Field paths are the Append's ("stream",
// "messages[2].data", "condition.after").
func ValidateAppend(c *fsmv1.Append) error { return inputCheck{rules: InputRules}.append(c) }

// ValidateAppendMulti is ValidateAppend for an AppendMulti ("streams",
// "streams[1].messages[0].type").
func ValidateAppendMulti(c *fsmv1.AppendMulti) error {
	return inputCheck{rules: InputRules}.appendMulti(c)
}

// ValidateExpectedVersion checks an expected version: unset, -1 (the
// stream does not exist) or more.
func ValidateExpectedVersion(field string, v *int64) error {
	if v != nil && *v < -1 {
		return invalid(field, "must be -1 (no stream) or more, got %d", *v)
	}
	return nil
}

// inputCheck is how a command is checked: under input rules rules and,
// when stamped, as the leader proposed it (every message has its id);
// an edge checks before the stamp.
type inputCheck struct {
	rules   uint32
	stamped bool
}

// check is how apply checks the entry being applied.
func (a *applier) check() inputCheck { return inputCheck{rules: a.rules, stamped: true} }

func (ck inputCheck) append(c *fsmv1.Append) error {
	if err := ValidateStreamName("stream", c.Stream); err != nil {
		return err
	}
	if err := ValidateExpectedVersion("expected_version", c.ExpectedVersion); err != nil {
		return err
	}
	if err := checkMessageCount("messages", len(c.Messages)); err != nil {
		return err
	}
	for i, m := range c.Messages {
		if err := ck.message("messages", i, m.Id, m.Type, m.Data, m.Metadata, m.Tags); err != nil {
			return err
		}
	}
	return ValidateCondition(c.Condition)
}

func (ck inputCheck) appendMulti(c *fsmv1.AppendMulti) error {
	if n := len(c.Streams); n < 1 || n > MaxMultiStreams {
		return invalid("streams", "must hold 1..%d streams, got %d", MaxMultiStreams, n)
	}
	seen := make(map[string]int, len(c.Streams))
	total, bytes := 0, 0
	for i, s := range c.Streams {
		field := func(f string) string { return fmt.Sprintf("streams[%d].%s", i, f) }
		if err := ValidateStreamName(field("stream"), s.Stream); err != nil {
			return err
		}
		if j, ok := seen[s.Stream]; ok {
			return invalid(field("stream"), "repeats streams[%d].stream %q: give each stream once", j, s.Stream)
		}
		seen[s.Stream] = i
		if err := ValidateExpectedVersion(field("expected_version"), s.ExpectedVersion); err != nil {
			return err
		}
		path := field("messages")
		if err := checkMessageCount(path, len(s.Messages)); err != nil {
			return err
		}
		for j, m := range s.Messages {
			if err := ck.message(path, j, m.Id, m.Type, m.Data, m.Metadata, m.Tags); err != nil {
				return err
			}
			bytes += len(m.Data) + len(m.Metadata)
		}
		total += len(s.Messages)
	}
	if total > MaxAppendMessages {
		return invalid("streams", "must hold 1..%d messages in all, got %d", MaxAppendMessages, total)
	}
	if bytes > MaxMultiBytes {
		return invalid("streams", "data and metadata are %d bytes in all, at most %d (8 MiB) per call", bytes, MaxMultiBytes)
	}
	return ValidateCondition(c.Condition)
}

// checkMessageCount checks the number of messages of an append, or of one
// stream of an AppendMulti: 1..MaxAppendMessages.
func checkMessageCount(field string, n int) error {
	if n < 1 || n > MaxAppendMessages {
		return invalid(field, "must hold 1..%d messages, got %d", MaxAppendMessages, n)
	}
	return nil
}

// message checks message i of the list path ("messages",
// "streams[2].messages") of an append or import. Field paths are built
// only on failure: this runs for every message applied.
func (ck inputCheck) message(path string, i int, id, typ string, data, metadata []byte, tags []string) error {
	var err error
	switch {
	case ck.stamped && id == "":
		err = invalid("id", "must be set by the leader")
	case ValidateTypeName("type", typ) != nil:
		err = ValidateTypeName("type", typ)
	default:
		err = checkObject("data", data, ck.rules, "must be a JSON object")
		if err == nil && !isNullJSON(metadata) {
			err = checkObject("metadata", metadata, ck.rules, "must be a JSON object or null")
		}
		if err == nil {
			if len(tags) == 0 {
				return nil
			}
			return ValidateTags(fmt.Sprintf("%s[%d].tags", path, i), tags)
		}
	}
	ve := err.(*ValidationError)
	ve.Field = fmt.Sprintf("%s[%d].%s", path, i, ve.Field)
	return ve
}
