package kurrentdb

import (
	"fmt"
	"strconv"
	"strings"
)

// allStream is the name KurrentDB gives the whole store as a source.
const allStream = "$all"

// maxGroupName is Skald's longest group name.
const maxGroupName = 128

// groupName is the Skald consumer group of KurrentDB's persistent
// subscription (stream, group): both escaped (letters, digits and '-'
// kept, every other byte as '_' and two hex digits), joined by '.', the
// stream of a $all subscription being "$all". It is a bijection: no two
// subscriptions share a Skald group, and List decodes it back.
func groupName(stream, group string) (string, error) {
	if group == "" {
		return "", invalid("a persistent subscription needs a group name")
	}
	name := escapeName(group) + "." + escapeName(stream)
	if len(name) > maxGroupName {
		return "", invalid("persistent subscription %q on %q is %d bytes as a Skald group name %q (limit %d): "+
			"use a shorter group or stream name", group, stream, len(name), name, maxGroupName)
	}
	return name, nil
}

// parseGroupName is the (stream, group) of a Skald group name made by
// groupName; ok false for a group that was not.
func parseGroupName(name string) (stream, group string, ok bool) {
	g, s, found := strings.Cut(name, ".")
	if !found {
		return "", "", false
	}
	group, okg := unescapeName(g)
	stream, oks := unescapeName(s)
	return stream, group, okg && oks && group != "" && stream != ""
}

func escapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "_%02X", c)
	}
	return b.String()
}

func unescapeName(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' {
			b.WriteByte(c)
			continue
		}
		if i+3 > len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}
