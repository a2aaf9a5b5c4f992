package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

// A read that returns as many messages as its limit (1000 unless
// --limit) may have stopped before the end. The read commands then look
// for one message after the last and, when there is one, say so and how
// to read on: on stderr for a table, as "next" in -o json.

// readOn says how to read on after a full page.
type readOn struct {
	next int64  // the position (or, for query, the global position "after") to go on from
	cmd  string // the command line that does
}

// fullPage reports whether msgs filled the read's limit (0: the server's
// 1000; negative: everything was asked for, so nothing is left).
func fullPage(limit int64, msgs []client.Message) bool {
	if limit == 0 {
		limit = 1000
	}
	return limit > 0 && int64(len(msgs)) >= limit
}

// page is what a read command found: its messages and, when they filled
// the limit and more follow, how to read on.
type page struct {
	msgs []client.Message
	hint *readOn
}

// readPage makes the page of msgs, read with limit: when they fill it
// and more finds a message after the last, on says how to read on.
func readPage(ctx context.Context, msgs []client.Message, limit int64,
	more func(ctx context.Context, last client.Message) (bool, error), on func(last client.Message) readOn) (page, error) {
	p := page{msgs: msgs}
	if fullPage(limit, msgs) {
		last := msgs[len(msgs)-1]
		found, err := more(ctx, last)
		if err != nil {
			return p, err
		}
		if found {
			h := on(last)
			p.hint = &h
		}
	}
	return p, nil
}

// readCommand is a read command (read, all, category, query) without its
// flags and call: a page as a table, with the hint on reading on on
// stderr, or as {"messages": [...], "next": N}.
func readCommand(name, usage string, minArgs, maxArgs int, stderr io.Writer) command.Command[page] {
	return command.Command[page]{
		Name: name, Usage: usage, MinArgs: minArgs, MaxArgs: maxArgs,
		Text: func(w io.Writer, _ []string, p page) error {
			if err := command.PrintMessages(w, "table", p.msgs); err != nil {
				return err
			}
			if p.hint != nil {
				fmt.Fprintf(stderr, "-- %s shown; more follow: %s\n", plural(int64(len(p.msgs)), "message"), p.hint.cmd)
			}
			return nil
		},
		JSON: func(p page) any {
			out := struct {
				Messages []command.JSONMessage `json:"messages"`
				Next     *int64                `json:"next,omitempty"`
			}{Messages: []command.JSONMessage{}}
			for _, m := range p.msgs {
				out.Messages = append(out.Messages, command.ToJSONMessage(m))
			}
			if p.hint != nil {
				out.Next = &p.hint.next
			}
			b, err := json.Marshal(out) // the messages' data as JSON, as encoding/json writes it
			if err != nil {
				return err
			}
			return json.RawMessage(b)
		},
	}
}

// plural is "1 message", "2 messages".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
