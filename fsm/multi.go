package fsm

import (
	"fmt"
	"strings"

	fsmv1 "github.com/skalddb/skald/fsm/fsmv1"
)

// Limits of an AppendMulti (one log entry). Messages in all: at most
// MaxAppendMessages, as for an Append.
const (
	// MaxMultiStreams is the most streams one AppendMulti writes.
	MaxMultiStreams = 100
	// MaxMultiBytes bounds the data and metadata of one AppendMulti.
	MaxMultiBytes = 8 << 20
)

// VersionConflictsError is returned when expected versions of an
// AppendMulti do not match: every such stream, in the command's order.
// Nothing was written.
type VersionConflictsError struct {
	Conflicts []VersionConflictError
}

func (e *VersionConflictsError) Error() string { return "fsm: " + e.Describe() }

// Describe is the error's text without the package prefix: the message
// both APIs send.
func (e *VersionConflictsError) Describe() string {
	parts := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		parts[i] = fmt.Sprintf("stream %q is at version %d, expected %d", c.Stream, c.Actual, c.Expected)
	}
	return "expected versions do not match: " + strings.Join(parts, "; ")
}

// part is stream i of c as an Append, for the per-stream rules.
func part(c *fsmv1.AppendMulti, i int) *fsmv1.Append {
	s := c.Streams[i]
	return &fsmv1.Append{Namespace: c.Namespace, Stream: s.Stream, ExpectedVersion: s.ExpectedVersion, Messages: s.Messages, TimeUnixNano: c.TimeUnixNano}
}

func (a *applier) appendMulti(l *Entry, c *fsmv1.AppendMulti) any {
	nb, skipped, done := a.target(l, c.Namespace)
	if done {
		return skipped
	}
	if err := a.check().appendMulti(c); err != nil {
		return err
	}
	if err := nb.checkConditionAfter(c.Condition); err != nil {
		return err
	}
	parts := make([]*fsmv1.Append, len(c.Streams))
	for i := range c.Streams {
		parts[i] = part(c, i)
	}
	if res, err := nb.checkMultiIDs(c, parts); err != nil {
		return err
	} else if res != nil {
		return res
	}
	// A hard-deleted stream refuses the whole call, as it refuses an
	// Append: after the retry check (a retry of a call written before the
	// delete is still answered) and before expected versions. Entries
	// proposed before the rule replay as they were applied.
	if a.rules >= InputRulesDeletedMulti {
		for _, p := range parts {
			if nb.stream(p.Stream).meta.flags&streamHardDeleted != 0 {
				return fmt.Errorf("%w: %q", ErrStreamDeleted, p.Stream)
			}
		}
	}
	var conflicts []VersionConflictError
	for _, p := range parts {
		if v := nb.stream(p.Stream).meta.lastPos; p.ExpectedVersion != nil && *p.ExpectedVersion != v {
			conflicts = append(conflicts, VersionConflictError{Stream: p.Stream, Expected: *p.ExpectedVersion, Actual: v})
		}
	}
	if len(conflicts) > 0 {
		return &VersionConflictsError{Conflicts: conflicts}
	}
	// conditionDecidedByLeader is false outside mutant builds; a mutant's
	// bug is that apply trusts the leader's verdict.
	if !conditionDecidedByLeader(l) {
		if err := a.checkCondition(nb, c.Condition); err != nil {
			return err
		}
	}
	total := 0
	for i, p := range parts {
		if err := checkStreamRoom(fmt.Sprintf("streams[%d].stream", i), nb.stream(p.Stream).meta.lastPos, len(p.Messages)); err != nil {
			return err
		}
		total += len(p.Messages)
	}
	if err := checkGlobalRoom(nb.nextGP, total); err != nil {
		return err
	}
	res := &fsmv1.AppendMultiResult{Namespace: c.Namespace, Streams: make([]*fsmv1.AppendResult, len(parts)), FirstGlobalPosition: nb.nextGP}
	sm := &nb.sm
	for i, p := range parts {
		st := nb.stream(p.Stream)
		ce := nb.catEntryFor(p.Stream)
		r := &fsmv1.AppendResult{Stream: p.Stream, FirstPosition: st.meta.lastPos + 1, FirstGlobalPosition: nb.nextGP}
		for _, m := range p.Messages {
			sm.Reset()
			sm.Id, sm.Stream, sm.Type, sm.Position = m.Id, p.Stream, m.Type, st.meta.lastPos+1
			sm.Data, sm.Metadata, sm.TimeUnixNano, sm.Tags = m.Data, NormalizeMetadata(m.Metadata), c.TimeUnixNano, m.Tags
			nb.writeMessage(ce, sm, nb.nextGP, st)
			nb.nextGP++
		}
		r.LastPosition, r.LastGlobalPosition = st.meta.lastPos, nb.nextGP-1
		nb.recordIDs(p, r.FirstPosition, r.FirstGlobalPosition)
		res.Streams[i] = r
	}
	res.LastGlobalPosition = nb.nextGP - 1
	nb.done(l)
	return res
}

// checkMultiIDs is checkIDs for every stream of an AppendMulti: a retry
// when every stream is one (the original positions), an error when a
// stream is refused or some streams are retries and others new, (nil,
// nil) when the call is new. A client id may appear only once in a call.
func (nb *nsBatch) checkMultiIDs(c *fsmv1.AppendMulti, parts []*fsmv1.Append) (*fsmv1.AppendMultiResult, error) {
	if dedupeWindow(nb.ns.rec) == DedupeOff {
		return nil, nil
	}
	type at struct{ stream, msg int }
	seen := map[string]at{}
	for i, p := range parts {
		for j, m := range p.Messages {
			if !m.ClientId {
				continue
			}
			if w, ok := seen[m.Id]; ok {
				return nil, invalid(fmt.Sprintf("streams[%d].messages[%d].id", i, j), "repeats streams[%d].messages[%d].id %s", w.stream, w.msg, m.Id)
			}
			seen[m.Id] = at{i, j}
		}
	}
	res := &fsmv1.AppendMultiResult{Namespace: c.Namespace, Streams: make([]*fsmv1.AppendResult, len(parts)), Duplicate: true}
	dups := 0
	for i, p := range parts {
		r, err := nb.checkIDs(p)
		if err != nil {
			if de, ok := err.(*DuplicateIDError); ok {
				de.Field = fmt.Sprintf("streams[%d].messages[%d]", i, de.Message)
			}
			return nil, err
		}
		if r == nil {
			continue
		}
		dups++
		res.Streams[i] = &fsmv1.AppendResult{Stream: r.Stream, FirstPosition: r.FirstPosition, LastPosition: r.LastPosition,
			FirstGlobalPosition: r.FirstGlobalPosition, LastGlobalPosition: r.LastGlobalPosition}
		if dups == 1 || r.FirstGlobalPosition < res.FirstGlobalPosition {
			res.FirstGlobalPosition = r.FirstGlobalPosition
		}
		res.LastGlobalPosition = max(res.LastGlobalPosition, r.LastGlobalPosition)
	}
	switch {
	case dups == 0:
		return nil, nil
	case dups < len(parts):
		for i, p := range parts {
			if r := res.Streams[i]; r != nil {
				return nil, &DuplicateIDError{Message: 0, Field: fmt.Sprintf("streams[%d].messages[0]", i), ID: p.Messages[0].Id,
					Stream: r.Stream, Position: r.FirstPosition, GlobalPosition: r.FirstGlobalPosition, Reason: DuplicateMixed}
			}
		}
	}
	return res, nil
}
