package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/skalddb/skald/client"
	"github.com/skalddb/skald/cmd/skald/internal/command"
)

const streamUsage = `Usage: skald stream <delete|truncate|delete-by-watermark> ...

  skald stream delete STREAM [--hard] [--expected-version N]
      remove every message of STREAM; the stream keeps its version and the next append
      continues after it. --hard leaves a tombstone: later appends and truncates fail (exit 5).
  skald stream truncate STREAM --before N
      remove the messages of STREAM whose position is below N (at most the version + 1)
  skald stream delete-by-watermark CATEGORY STREAM=POS... [--type T]...
      remove, in CATEGORY, each STREAM's messages up to POS (inclusive), or only those of
      the types given (--type once per type); one write for all the streams (at most 10000)

Removed messages are gone from every read; positions are never reused. A stream that never
had a message: exit 4. When the answer is lost (exit 1 or 6, "may have been applied"), a
truncate, a watermark deletion, a hard delete or a delete with --expected-version may be run
again: repeating them removes nothing more. A soft delete without --expected-version would also
remove what others appended since: read the stream first. Each asks first on a terminal;
without one (a script, a pipe) it needs --yes.
`

func runStream(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "stream", streamUsage, map[string]runFunc{
		"delete": streamDelete(stderr).Run, "truncate": streamTruncate(stderr).Run, "delete-by-watermark": deleteByWatermark(stderr).Run,
	}, args, stdout, stderr)
}

// streamDelete is stream delete: it asks on stderr's terminal first.
func streamDelete(stderr io.Writer) command.Command[client.DeletionResult] {
	var hard, yes *bool
	var expected optionalInt64
	return command.Command[client.DeletionResult]{
		Name: "stream delete", Usage: "skald stream delete STREAM [--hard] [--expected-version N] [--yes]", MinArgs: 1, MaxArgs: 1,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			hard = fs.Bool("hard", false, "leave a tombstone: later appends and truncates of the stream fail")
			fs.Var(&expected, "expected-version", "delete only if the stream is at version `N` (default: any version)")
			yes = command.AddYes(fs)
			return func(args []string) error {
				what, question := "deletes every message of stream "+args[0], "Delete every message of stream "+args[0]+"?"
				if *hard {
					what += " for good (--hard)"
					question = "Delete every message of stream " + args[0] + " and refuse any later append to it (--hard)?"
				}
				return command.Confirm("stream delete", what, question, *yes, os.Stdin, stderr)
			}
		},
		Call: func(ctx context.Context, c *client.Client, args []string) (client.DeletionResult, error) {
			var opts []client.DeleteOption
			if *hard {
				opts = append(opts, client.Hard())
			}
			if expected.set {
				opts = append(opts, client.ExpectDeleteVersion(expected.v))
			}
			return c.DeleteStream(ctx, args[0], opts...)
		},
		Text: func(w io.Writer, args []string, res client.DeletionResult) error {
			how := "Deleted"
			if *hard {
				how = "Hard-deleted"
			}
			_, err := fmt.Fprintf(w, "%s %s: %s removed (version %d, index %d).\n", how, args[0], plural(res.MessagesDeleted, "message"), res.Version, res.Index)
			return err
		},
	}
}

// streamTruncate is stream truncate: it asks on stderr's terminal first.
func streamTruncate(stderr io.Writer) command.Command[client.DeletionResult] {
	var before optionalInt64
	var yes *bool
	return command.Command[client.DeletionResult]{
		Name: "stream truncate", Usage: "skald stream truncate STREAM --before N [--yes]", MinArgs: 1, MaxArgs: 1,
		Flags: func(fs *flag.FlagSet) func([]string) error {
			fs.Var(&before, "before", "remove the messages whose position is below `N` (required)")
			yes = command.AddYes(fs)
			return func(args []string) error {
				if !before.set {
					return command.Mistake("--before is required")
				}
				return command.Confirm("stream truncate", fmt.Sprintf("removes the messages of stream %s below position %d", args[0], before.v),
					fmt.Sprintf("Remove the messages of stream %s below position %d?", args[0], before.v), *yes, os.Stdin, stderr)
			}
		},
		Call: func(ctx context.Context, c *client.Client, args []string) (client.DeletionResult, error) {
			return c.TruncateStream(ctx, args[0], before.v)
		},
		Text: func(w io.Writer, args []string, res client.DeletionResult) error {
			_, err := fmt.Fprintf(w, "Truncated %s before position %d: %s removed (version %d, index %d).\n", args[0], before.v, plural(res.MessagesDeleted, "message"), res.Version, res.Index)
			return err
		},
	}
}

// stringList is a flag given once per value.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// deleteByWatermark is stream delete-by-watermark: it asks on stderr's
// terminal first.
func deleteByWatermark(stderr io.Writer) command.Command[client.WatermarkDeletionResult] {
	var types stringList
	var yes *bool
	var marks map[string]int64
	return command.Command[client.WatermarkDeletionResult]{
		Name: "stream delete-by-watermark", Usage: "skald stream delete-by-watermark CATEGORY STREAM=POS... [--type T]... [--yes]",
		MinArgs: 2, MaxArgs: math.MaxInt, // the server bounds the streams
		Flags: func(fs *flag.FlagSet) func([]string) error {
			fs.Var(&types, "type", "remove only messages of type `T` (once per type; default: every type)")
			yes = command.AddYes(fs)
			return func(args []string) error {
				var err error
				if marks, err = parseWatermarks(args[1:]); err != nil {
					return command.Mistake("%s", err)
				}
				return command.Confirm("stream delete-by-watermark", fmt.Sprintf("deletes messages of %s from %s of category %s", typesOf(types), plural(int64(len(marks)), "stream"), args[0]),
					fmt.Sprintf("Delete the messages of %s at or below the given positions in %s of category %s?", typesOf(types), plural(int64(len(marks)), "stream"), args[0]), *yes, os.Stdin, stderr)
			}
		},
		Call: func(ctx context.Context, c *client.Client, args []string) (client.WatermarkDeletionResult, error) {
			return c.DeleteByWatermark(ctx, args[0], marks, types...)
		},
		Text: func(w io.Writer, args []string, res client.WatermarkDeletionResult) error {
			_, err := fmt.Fprintf(w, "Deleted %s from %s of %s (index %d).\n", plural(res.MessagesDeleted, "message"), plural(res.Streams, "stream"), args[0], res.Index)
			return err
		},
	}
}

// typesOf names the message types a watermark deletion removes.
func typesOf(types []string) string {
	if len(types) == 0 {
		return "every type"
	}
	return "type " + strings.Join(types, ", ")
}

// parseWatermarks reads STREAM=POS arguments; a stream named twice is an
// error (the server takes a map).
func parseWatermarks(args []string) (map[string]int64, error) {
	marks := make(map[string]int64, len(args))
	for _, a := range args {
		i := strings.LastIndexByte(a, '=')
		if i <= 0 {
			return nil, fmt.Errorf("%q: want STREAM=POS", a)
		}
		stream := a[:i]
		pos, err := strconv.ParseInt(a[i+1:], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: the position is not an integer", a)
		}
		if _, dup := marks[stream]; dup {
			return nil, fmt.Errorf("stream %q given twice", stream)
		}
		marks[stream] = pos
	}
	return marks, nil
}
