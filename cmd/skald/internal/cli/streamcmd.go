package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	skaldv1 "github.com/skalddb/skald/api/skald/v1"
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
	if len(args) == 0 {
		fmt.Fprint(stderr, streamUsage, command.ClientHelp)
		return command.Exit(command.ExitUsage, fmt.Errorf("stream: missing subcommand"))
	}
	switch args[0] {
	case "delete":
		return runStreamDelete(ctx, args[1:], stdout, stderr)
	case "truncate":
		return runStreamTruncate(ctx, args[1:], stdout, stderr)
	case "delete-by-watermark":
		return runDeleteByWatermark(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, streamUsage, command.ClientHelp)
		return nil
	}
	fmt.Fprint(stderr, streamUsage)
	return command.Exit(command.ExitUsage, fmt.Errorf("stream: unknown subcommand %q", args[0]))
}

func runStreamDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("stream delete", "skald stream delete STREAM [--hard] [--expected-version N] [--yes]", stderr)
	hard := fs.Bool("hard", false, "leave a tombstone: later appends and truncates of the stream fail")
	var expected optionalInt64
	fs.Var(&expected, "expected-version", "delete only if the stream is at version `N` (default: any version)")
	yes := command.AddYes(fs)
	rest, err := cf.Parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	what, question := "deletes every message of stream "+rest[0], "Delete every message of stream "+rest[0]+"?"
	if *hard {
		what += " for good (--hard)"
		question = "Delete every message of stream " + rest[0] + " and refuse any later append to it (--hard)?"
	}
	if err := command.Confirm("stream delete", what, question, *yes, os.Stdin, stderr); err != nil {
		return err
	}
	var opts []client.DeleteOption
	if *hard {
		opts = append(opts, client.Hard())
	}
	if expected.set {
		opts = append(opts, client.ExpectDeleteVersion(expected.v))
	}
	c, err := cf.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.DeleteStream(ctx, rest[0], opts...)
	if err != nil {
		return command.APIError(err)
	}
	if cf.Output == "json" {
		return command.PrintJSON(stdout, &skaldv1.DeleteStreamResponse{MessagesDeleted: res.MessagesDeleted, Version: res.Version, Index: res.Index})
	}
	how := "Deleted"
	if *hard {
		how = "Hard-deleted"
	}
	fmt.Fprintf(stdout, "%s %s: %s removed (version %d, index %d).\n", how, rest[0], plural(res.MessagesDeleted, "message"), res.Version, res.Index)
	return nil
}

func runStreamTruncate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("stream truncate", "skald stream truncate STREAM --before N [--yes]", stderr)
	var before optionalInt64
	fs.Var(&before, "before", "remove the messages whose position is below `N` (required)")
	yes := command.AddYes(fs)
	rest, err := cf.Parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if !before.set {
		return cf.UsageError(fs, "--before is required")
	}
	if err := command.Confirm("stream truncate", fmt.Sprintf("removes the messages of stream %s below position %d", rest[0], before.v),
		fmt.Sprintf("Remove the messages of stream %s below position %d?", rest[0], before.v), *yes, os.Stdin, stderr); err != nil {
		return err
	}
	c, err := cf.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.TruncateStream(ctx, rest[0], before.v)
	if err != nil {
		return command.APIError(err)
	}
	if cf.Output == "json" {
		return command.PrintJSON(stdout, &skaldv1.TruncateStreamResponse{MessagesDeleted: res.MessagesDeleted, Version: res.Version, Index: res.Index})
	}
	fmt.Fprintf(stdout, "Truncated %s before position %d: %s removed (version %d, index %d).\n", rest[0], before.v, plural(res.MessagesDeleted, "message"), res.Version, res.Index)
	return nil
}

// stringList is a flag given once per value.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func runDeleteByWatermark(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cf := command.NewFlagSet("stream delete-by-watermark", "skald stream delete-by-watermark CATEGORY STREAM=POS... [--type T]... [--yes]", stderr)
	var types stringList
	fs.Var(&types, "type", "remove only messages of type `T` (once per type; default: every type)")
	yes := command.AddYes(fs)
	rest, err := cf.Parse(fs, args, 2, math.MaxInt) // the server bounds the streams
	if err != nil {
		return err
	}
	marks, err := parseWatermarks(rest[1:])
	if err != nil {
		return cf.UsageError(fs, err.Error())
	}
	if err := command.Confirm("stream delete-by-watermark", fmt.Sprintf("deletes messages of %s from %s of category %s", typesOf(types), plural(int64(len(marks)), "stream"), rest[0]),
		fmt.Sprintf("Delete the messages of %s at or below the given positions in %s of category %s?", typesOf(types), plural(int64(len(marks)), "stream"), rest[0]), *yes, os.Stdin, stderr); err != nil {
		return err
	}
	c, err := cf.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.DeleteByWatermark(ctx, rest[0], marks, types...)
	if err != nil {
		return command.APIError(err)
	}
	if cf.Output == "json" {
		return command.PrintJSON(stdout, &skaldv1.DeleteByWatermarkResponse{MessagesDeleted: res.MessagesDeleted, Streams: res.Streams, Index: res.Index})
	}
	fmt.Fprintf(stdout, "Deleted %s from %s of %s (index %d).\n", plural(res.MessagesDeleted, "message"), plural(res.Streams, "stream"), rest[0], res.Index)
	return nil
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
