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

// printRead writes a read's messages; when they filled limit and more
// reports a message after the last, with the hint on reads on.
func printRead(ctx context.Context, stdout, stderr io.Writer, output string, msgs []client.Message, limit int64,
	more func(ctx context.Context, last client.Message) (bool, error), on func(last client.Message) readOn) error {
	var hint *readOn
	if fullPage(limit, msgs) {
		last := msgs[len(msgs)-1]
		found, err := more(ctx, last)
		if err != nil {
			return command.APIError(err)
		}
		if found {
			h := on(last)
			hint = &h
		}
	}
	if output == "json" {
		out := struct {
			Messages []command.JSONMessage `json:"messages"`
			Next     *int64                `json:"next,omitempty"`
		}{Messages: []command.JSONMessage{}}
		for _, m := range msgs {
			out.Messages = append(out.Messages, command.ToJSONMessage(m))
		}
		if hint != nil {
			out.Next = &hint.next
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	if err := command.PrintMessages(stdout, output, msgs); err != nil {
		return err
	}
	if hint != nil {
		fmt.Fprintf(stderr, "-- %s shown; more follow: %s\n", plural(int64(len(msgs)), "message"), hint.cmd)
	}
	return nil
}

// plural is "1 message", "2 messages".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
