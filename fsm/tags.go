package fsm

import (
	"fmt"
)

// Limits of tags and queries (DCB). A query item may not ask for more
// tags than a message can carry: it could never match.
const (
	// MaxMessageTags is the most tags one message carries.
	MaxMessageTags = 32
	// MaxTagBytes is the longest tag, in bytes.
	MaxTagBytes = 256
	// MaxQueryItems is the most items of one query.
	MaxQueryItems = 16
	// MaxQueryItemTypes is the most types of one query item.
	MaxQueryItemTypes = 32
)

// ValidateTag checks one tag: 1..256 bytes of UTF-8 without NUL.
func ValidateTag(field, tag string) error {
	return validateName(field, tag, MaxTagBytes)
}

// ValidateTags checks the tags of one message: at most MaxMessageTags,
// each valid, none twice. field is the path of the list ("messages[0].tags").
func ValidateTags(field string, tags []string) error {
	if len(tags) == 0 {
		return nil
	}
	if len(tags) > MaxMessageTags {
		return invalid(field, "must hold at most %d tags, got %d", MaxMessageTags, len(tags))
	}
	for i, t := range tags {
		if err := ValidateTag(fmt.Sprintf("%s[%d]", field, i), t); err != nil {
			return err
		}
		for j := range i {
			if tags[j] == t {
				return invalid(fmt.Sprintf("%s[%d]", field, i), "repeats %s[%d] %q", field, j, t)
			}
		}
	}
	return nil
}

// QueryItem matches a message whose type is any of Types (any type when
// empty) and which carries every one of Tags.
type QueryItem struct {
	Types []string
	Tags  []string
}

// Query matches the messages any of its items match.
type Query struct {
	Items []QueryItem
}

// ValidateQuery checks a query: 1..MaxQueryItems items, each naming at
// least one type or tag, at most MaxQueryItemTypes types and
// MaxMessageTags tags, every name valid. field is the query's path
// ("query", "condition.fail_if_events_match").
func ValidateQuery(field string, q Query) error {
	if n := len(q.Items); n < 1 || n > MaxQueryItems {
		return invalid(field+".items", "must hold 1..%d items, got %d", MaxQueryItems, n)
	}
	for i, it := range q.Items {
		path := fmt.Sprintf("%s.items[%d]", field, i)
		switch {
		case len(it.Types) == 0 && len(it.Tags) == 0:
			return invalid(path, "must name at least one type or tag")
		case len(it.Types) > MaxQueryItemTypes:
			return invalid(path+".types", "must hold at most %d types, got %d", MaxQueryItemTypes, len(it.Types))
		case len(it.Tags) > MaxMessageTags:
			return invalid(path+".tags", "must hold at most %d tags (a message carries no more), got %d", MaxMessageTags, len(it.Tags))
		}
		for j, t := range it.Types {
			if err := ValidateTypeName(fmt.Sprintf("%s.types[%d]", path, j), t); err != nil {
				return err
			}
		}
		for j, t := range it.Tags {
			if err := ValidateTag(fmt.Sprintf("%s.tags[%d]", path, j), t); err != nil {
				return err
			}
		}
	}
	return nil
}
